// Process entry: configuration, database (migrated), demo data on an empty embedded database,
// listen, graceful shutdown on SIGTERM/SIGINT.
import { createServer } from "node:http";
import { createApp } from "./app.js";
import { closeServices, createServices } from "./bootstrap.js";
import { loadConfig } from "./config.js";
import { loadFixture } from "./admin/fixture.js";
import { demoFixture } from "./admin/demo.js";
import { purgeExpiredIdempotencyRecords } from "./idempotency.js";

const config = loadConfig();
const services = await createServices(config);
const { logger } = services;

if (!config.databaseUrl && !config.noDemo && (await services.db.prisma.tenant.count()) === 0) {
  const ids = await loadFixture(services.db, demoFixture());
  const demo = ids.tenants.demo!;
  const key = demo.apiKeys.demo!.key;
  const base = `http://${config.host}:${config.port}`;
  process.stdout.write(
    `\nDemo tenant loaded (${demo.id}).\nAPI key (shown once): ${key}\nTry:\n  curl -s -H 'X-API-Key: ${key}' ${base}/public/v1/me\n\n`,
  );
}

const app = createApp(services);
const server = createServer(app);
server.keepAliveTimeout = 5_000;
server.listen(config.port, config.host, () => {
  logger.info({ host: config.host, port: config.port, database: services.db.kind, redis: Boolean(services.redis) }, "listening");
});

const purge = setInterval(() => {
  purgeExpiredIdempotencyRecords(services.db).catch((err) => logger.warn({ err: err.message }, "idempotency purge failed"));
}, 3_600_000);
purge.unref();

let stopping = false;
async function shutdown(signal: string) {
  if (stopping) return;
  stopping = true;
  logger.info({ signal }, "shutting down: finishing in-flight requests");
  clearInterval(purge);
  const force = setTimeout(() => process.exit(1), 10_000);
  force.unref();
  server.close(async () => {
    await closeServices(services).catch(() => {});
    logger.info("stopped");
    process.exit(0);
  });
  server.closeIdleConnections();
}
process.on("SIGTERM", () => void shutdown("SIGTERM"));
process.on("SIGINT", () => void shutdown("SIGINT"));
