// Process entry: configuration, database (migrated), demo data on an empty embedded database,
// listen (and the /metrics listener on METRICS_PORT), graceful shutdown on SIGTERM/SIGINT.
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { Server as NetServer } from "node:net";
import { createApp } from "./app.js";
import { closeServices, createServices } from "./bootstrap.js";
import { loadConfig, npmScript } from "./config.js";
import { loadFixture } from "./admin/fixture.js";
import { curlLine, DEMO_KEY_COMMAND, demoFixture, localBaseUrl, tenantsNotice } from "./admin/demo.js";
import { startBackground } from "./background.js";
import { ClosingResponse, isStopping, startStopping } from "./lifecycle.js";
import { originForm } from "./http.js";
import { startMetricsServer } from "./metrics.js";
import { checkDatabaseConnections, exitOnStartupError } from "./startup-error.js";
import { once } from "node:events";
import { newLocalToken, removeServiceFile, writeServiceFile } from "./admin/live.js";
import { answerClientErrors, HTTP_SERVER_OPTIONS } from "./http-server.js";

// Until listening, a configuration or connection error prints one line and exits 1 (server/startup-error.ts).
const started = exitOnStartupError();

const config = loadConfig();
await checkDatabaseConnections(config);
const services = await createServices(config);
const { logger } = services;

const base = localBaseUrl(config.host, config.port);
// On the embedded database: a token for the admin CLI's calls while this process holds the folder.
// (memory:// has no folder, and no other process can share it.)
if (!config.databaseUrl && config.dataDir !== "memory://") services.localAdminToken = newLocalToken();
// What this start says about the tenants, logged after "listening": the demo key on
// the first start; later, how to get a new one; on a database without tenants, the next step.
let tenants: Awaited<ReturnType<typeof tenantsNotice>>;
if (!config.databaseUrl && !config.noDemo && (await services.db.prisma.tenant.count()) === 0) {
  // The demo's key is shown once: a start that cannot listen (a port in use) must fail before it
  // loads the demo, or the key would be printed for a service that never ran.
  await assertCanListen(config.port, config.host);
  if (config.metricsPort !== undefined) await assertCanListen(config.metricsPort, config.metricsHost);
  const ids = await loadFixture(services.db, demoFixture(new Date(), { fixedIds: true }));
  const demo = ids.tenants.demo!;
  const key = demo.apiKeys.demo!.key;
  process.stdout.write(
    `\nDemo tenant loaded (${demo.id}).\nAPI key (shown once): ${key}\nTry:\n  ${curlLine(key, base)}\n` +
      `API reference: ${base}/docs\nLater, for a new key: ${DEMO_KEY_COMMAND}\n\n`,
  );
} else tenants = await tenantsNotice(services.db, !config.databaseUrl).catch(() => undefined);

/** Rejects with the listen error (EADDRINUSE, EACCES …) when `port` cannot be bound now; frees it again. */
async function assertCanListen(port: number, host: string): Promise<void> {
  const probe = createServer();
  probe.listen(port, host);
  try {
    await once(probe, "listening");
  } finally {
    probe.close();
  }
}

// The embedded database for Prisma Studio and psql (`npm run studio`), on 127.0.0.1 (EMBEDDED_SQL_PORT).
const sqlSocket =
  services.localAdminToken && config.embeddedSqlPort !== undefined
    ? await services.db.serveSql?.(config.embeddedSqlPort)
    : undefined;

const app = createApp(services);
// Shutdown bookkeeping (see shutdown()): how many responses are in progress. Once stopping, responses
// that have not written their headers say "Connection: close" (server/lifecycle.ts).
let inProgress = 0;
function responseClosed() {
  inProgress -= 1;
}
const server = createServer(
  { ...HTTP_SERVER_OPTIONS, ServerResponse: ClosingResponse },
  (req: IncomingMessage, res: ServerResponse) => {
    // The target in origin form first (server/app.ts does the same), so an absolute-form /readyz is one too.
    req.url = originForm(req.url ?? "/");
    if (isStopping() && req.url === "/readyz") {
      res
        .writeHead(503, { "Content-Type": "application/json" })
        .end(JSON.stringify({ status: "unavailable", checks: { shutdown: "stopping" } }));
      return;
    }
    inProgress += 1;
    res.once("close", responseClosed);
    app(req, res);
  },
);
answerClientErrors(server);
server.keepAliveTimeout = 5_000;
server.listen(config.port, config.host, () => {
  const redis = redisState();
  logger.info(
    {
      host: config.host,
      port: config.port,
      database: services.db.kind,
      redis: redis.state,
      ...(redis.cluster ? { redisCluster: true } : {}),
      quotas: redis.quotas,
    },
    `listening on http://${config.host.includes(":") ? `[${config.host}]` : config.host}:${config.port} ` +
      `(database: ${services.db.kind}; ${redis.text})`,
  );
  logger.info(
    { docs: `${base}/docs`, openapi: `${base}/public/v1/openapi.json` },
    `API reference: ${base}/docs (OpenAPI document: ${base}/public/v1/openapi.json)`,
  );
  if (tenants) logger.info(tenants.tenantId ? { tenantId: tenants.tenantId } : {}, tenants.msg);
  if (sqlSocket)
    logger.info(
      { sql: sqlSocket.psqlUrl },
      `embedded database over SQL: npm run studio, or psql '${sqlSocket.psqlUrl}' (one client at a time)`,
    );
  if (services.localAdminToken) {
    try {
      const sql = sqlSocket ? { url: sqlSocket.url, psqlUrl: sqlSocket.psqlUrl } : undefined;
      writeServiceFile(config.dataDir, { pid: process.pid, url: base, token: services.localAdminToken, sql });
    } catch (err) {
      logger.warn(
        { err: (err as Error).message },
        "could not write the folder's service file: the admin CLI's demo-key cannot reach this service",
      );
    }
  }
});
if (services.localAdminToken) process.on("exit", () => removeServiceFile(config.dataDir, process.pid));
/** Redis as it is now: not configured, connected, or configured but unreachable (quotas then count in this process). */
function redisState(): {
  state: "not configured" | "connected" | "unreachable";
  cluster: boolean;
  quotas: "shared" | "in process";
  text: string;
} {
  const cluster = Boolean(config.redisClusterNodes);
  const what = cluster ? "Redis Cluster" : "Redis";
  if (!services.redis)
    return {
      state: "not configured",
      cluster,
      quotas: "in process",
      text: "Redis not configured: quotas in process memory",
    };
  if (services.redis.status === "ready")
    return { state: "connected", cluster, quotas: "shared", text: `${what} connected: quotas shared` };
  return {
    state: "unreachable",
    cluster,
    quotas: "in process",
    text: `${what} configured but unreachable: quotas in process memory until it connects`,
  };
}
// Prometheus metrics on a listener of their own (METRICS_PORT; off when unset): never on the public port.
const metricsServer =
  config.metricsPort === undefined
    ? undefined
    : await startMetricsServer(services.metrics, config.metricsHost, config.metricsPort);
if (metricsServer) logger.info({ url: `${metricsServer.url}/metrics` }, "metrics listening");
// A listen error (port in use) rejects: reported by the handler above
if (!server.listening) await once(server, "listening");
started();

// The feed's sequencer, the purges and the delivery sweep (server/background.ts).
const background = startBackground(services);

/**
 * Graceful shutdown (SIGTERM/SIGINT): stop accepting connections (new ones are refused, so a load
 * balancer retries them elsewhere; /readyz answers 503 meanwhile), answer every request already
 * accepted — the responses in progress and requests arriving on open keep-alive connections — with
 * "Connection: close", give idle keep-alive connections IDLE_GRACE_MS to send a last request, then
 * close them, release the database and Redis and exit 0. Whatever is still running after
 * FORCE_EXIT_MS (under the 10 s an orchestrator waits) is cut and the exit status is 1.
 */
const IDLE_GRACE_MS = 1_000;
const FORCE_EXIT_MS = 9_500;
async function shutdown(signal: string) {
  if (isStopping()) return;
  startStopping();
  // Waiting long-polls answer now (empty, or what they have): a rolling deploy loses no position.
  services.wakeups?.close();
  logger.info({ signal, inProgress }, "shutting down: finishing in-flight requests");
  background.stop();
  metricsServer?.close();
  metricsServer?.closeAllConnections();
  const force = setTimeout(() => {
    logger.warn({ inProgress }, "shutdown: requests still running, closing their connections");
    server.closeAllConnections();
    process.exit(1);
  }, FORCE_EXIT_MS);
  force.unref();
  // net.Server#close only stops listening (http.Server#close would also drop idle keep-alive
  // connections at once, racing a request the client may be sending on one right now).
  NetServer.prototype.close.call(server, async () => {
    clearTimeout(idle);
    await sqlSocket?.close().catch(() => {});
    await closeServices(services).catch(() => {});
    logger.info("stopped");
    process.exit(0);
  });
  const idle = setTimeout(() => server.closeIdleConnections(), IDLE_GRACE_MS);
}
process.on("SIGTERM", () => void shutdown("SIGTERM"));
process.on("SIGINT", () => void shutdown("SIGINT"));
// `npm start` execs node (package.json), so npm's SIGTERM/SIGINT reach it. Should npm die without
// passing one on (SIGKILL), stop as on SIGTERM rather than run on as an orphan.
if (npmScript() === "start") {
  const npm = process.ppid;
  const npmGone = () => {
    try {
      process.kill(npm, 0);
      return false;
    } catch (err) {
      return (err as NodeJS.ErrnoException).code === "ESRCH";
    }
  };
  setInterval(() => npmGone() && void shutdown("parent exited"), 1_000).unref();
}
