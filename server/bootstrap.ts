// Builds the services from configuration: database (migrated), Redis, quotas, logger, providers.
import type { Config } from "./config.js";
import { openDatabase, type Database } from "./db/client.js";
import { migrate } from "./db/migrate.js";
import { Quotas } from "./limits/quotas.js";
import { createLogger, type Logger } from "./logger.js";
import { connectRedis } from "./redis.js";
import { createProviders } from "./channels/providers.js";
import type { Services } from "./services.js";

export async function createServices(config: Config, opts: { db?: Database; logger?: Logger; now?: () => Date } = {}): Promise<Services> {
  const logger = opts.logger ?? createLogger(config.logLevel);
  const db = opts.db ?? (await openDatabase(config));
  await migrate(db.sql);
  const redis = config.redisUrl ? connectRedis(config.redisUrl, logger) : undefined;
  return {
    config,
    db,
    redis,
    quotas: new Quotas(redis),
    logger,
    providers: createProviders({ timeoutMs: config.providerTimeoutMs, logger }),
    now: opts.now ?? (() => new Date()),
  };
}

export async function closeServices(s: Services): Promise<void> {
  s.redis?.disconnect();
  await s.db.close();
}
