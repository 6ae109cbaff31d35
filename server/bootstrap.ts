// Builds the services from configuration: database (migrated through DIRECT_DATABASE_URL), Redis
// (one server or a cluster), quotas, metrics, logger, providers.
import type { Config } from "./config.js";
import { openDatabase, openPostgres, type Database, type PostgresOptions } from "./db/client.js";
import { tenantRoutes, type TenantRoutes } from "./db/routing.js";
import { migrateDirect } from "./db/migrate.js";
import { Quotas } from "./limits/quotas.js";
import { createLogger, type Logger } from "./logger.js";
import { Metrics } from "./metrics.js";
import { openRedis, type RedisClient } from "./redis.js";
import { createProviders } from "./channels/providers.js";
import type { Services } from "./services.js";
import { Wakeups } from "./wakeups.js";
import { feedState } from "./changes.js";

export async function createServices(
  config: Config,
  opts: { db?: Database; logger?: Logger; now?: () => Date; redisReadyMs?: number } = {},
): Promise<Services> {
  const logger = opts.logger ?? createLogger(config.logLevel, config.logFormat);
  const db =
    opts.db ??
    (await openDatabase(config, {
      onUnnamed: (reason) =>
        logger.warn(
          { reason },
          "the database connections do not keep named prepared statements (a transaction pooler?): sending " +
            "unnamed statements from now on",
        ),
      onTimeoutFallback: (reason) => logger.warn({ reason }, timeoutFallbackMessage(config.databaseStatementTimeoutMs)),
    }));
  await migrateDirect(config, db);
  if (db.kind === "postgres" && config.directDatabaseUrl !== config.databaseUrl) await reportPooledTimeout(db, logger);
  const redis = await openRedis(config, logger, opts.redisReadyMs);
  if (config.databaseUrl && !redis)
    logger.warn(
      "DATABASE_URL is set without REDIS_URL or REDIS_CLUSTER_NODES: rate limits are counted in this process " +
        "only, so N instances admit up to N times each key's ceiling; set one of them when running more than one " +
        "instance",
    );
  const quotas = new Quotas(redis);
  const routes = workerRoutes(config, db, logger);
  const wakeups = new Wakeups({
    maxWaiters: config.changesMaxWaiters,
    rereadMs: config.changesRereadMs,
    redis,
    logger,
    probe: (tenantId) => feedState(db.prisma, tenantId),
  });
  const metrics = instanceMetrics(db, redis, quotas, { processMetrics: true, routes, wakeups });
  return {
    config,
    db,
    routes,
    redis,
    quotas,
    logger,
    metrics,
    providers: createProviders({ timeoutMs: config.providerTimeoutMs, logger, metrics }),
    wakeups,
    now: opts.now ?? (() => new Date()),
  };
}

/** The metrics of one instance, reading the database pool and the quotas' Redis fallback state. */
export function instanceMetrics(
  db: Database,
  redis: RedisClient | undefined,
  quotas: Quotas,
  opts: { processMetrics?: boolean; routes?: TenantRoutes; wakeups?: Wakeups } = {},
): Metrics {
  return new Metrics(
    {
      // The coordinator's pool, plus the workers' with DATABASE_ROUTING=workers (summed).
      pool: () => {
        const own = db.poolStats?.();
        const workers = opts.routes?.poolStats();
        return own && workers
          ? { total: own.total + workers.total, idle: own.idle + workers.idle, waiting: own.waiting + workers.waiting }
          : own;
      },
      quotas: () => ({ redis: Boolean(redis), fallback: quotas.fallback, fallbackCount: quotas.fallbackCount }),
      wakeups: () => opts.wakeups?.stats ?? { waiters: 0, wakeups: 0, refused: 0 },
      emptyWritesRerun: () => emptyWritesRerun.count,
    },
    opts,
  );
}

/**
 * The one warning of a pool that met a pooler refusing the statement_timeout startup parameter
 * (server/db/pooler-timeout.ts): what the service does now, and the pooler's better setting.
 */
export function timeoutFallbackMessage(ms: number): string {
  return (
    "the pooler refused the statement_timeout startup parameter: the service now sets " +
    `statement_timeout = ${ms} with SET LOCAL in every transaction ` +
    "(a statement outside one is wrapped in BEGIN … COMMIT: 2 more round trips); better, in PgBouncer: " +
    "ignore_startup_parameters = extra_float_digits,statement_timeout and " +
    `connect_query = 'SET statement_timeout = ${ms}' (or ALTER ROLE … SET statement_timeout = ${ms})`
  );
}

/**
 * Behind a pooler (DATABASE_URL ≠ DIRECT_DATABASE_URL) the startup parameter that carries the
 * statement timeout is either ignored by the pooler (the server connections then carry the pooler's
 * connect_query or the role's setting) or refused (the pool then sets it with SET LOCAL itself).
 * Say at start which it is, read through the pool: this first pooled statement is also the one that
 * meets a refusal (the fallback's own warning names it).
 */
async function reportPooledTimeout(db: Database, logger: Logger): Promise<void> {
  try {
    const [row] = await db.sql.query<{ statement_timeout: string }>("SHOW statement_timeout");
    const value = row?.statement_timeout ?? "unknown";
    if (db.statementTimeout?.().route === "SET LOCAL")
      logger.info(
        { statementTimeout: value, route: "SET LOCAL" },
        "statement_timeout of the pooled statements: set by the service in every transaction (the pooler " +
          "refused the startup parameter)",
      );
    else if (value === "0")
      logger.warn(
        { statementTimeout: value },
        "no statement_timeout on the pooled connections: set it in PgBouncer's connect_query or on the role",
      );
    else logger.info({ statementTimeout: value, route: "server" }, "statement_timeout on the pooled connections");
  } catch (err) {
    logger.warn({ err: (err as Error).message }, "could not read statement_timeout through the pooler");
  }
}

/** How often this process's worker pools sent a write that changed no row once more (/metrics). */
export const emptyWritesRerun = { count: 0 };

/**
 * What a worker's pool is opened with beyond the coordinator pool's options: the tenant in the
 * statements' text (server/db/literal.ts: Citus's fast path plans it on the local shard), and a write
 * that changed no row sent again (server/db/client.ts rerunEmptyWrites: Citus's writes rerouted by a
 * split on this node), counted.
 */
export const WORKER_POOL: Pick<PostgresOptions, "inlineTenant" | "rerunEmptyWrites" | "onRerun"> = {
  inlineTenant: true,
  rerunEmptyWrites: true,
  onRerun: () => {
    emptyWritesRerun.count += 1;
  },
};

/**
 * DATABASE_ROUTING=workers: the tenants' requests on their workers (server/db/routing.ts), each
 * worker's pool with the coordinator pool's settings and WORKER_POOL. `open` defaults to that; tests
 * pass their own (which must spread WORKER_POOL).
 */
export function workerRoutes(
  config: Pick<Config, "databaseRouting" | "databaseUrl" | "databaseStatementTimeoutMs" | "countQueries">,
  db: Database,
  logger: Logger,
  open: (url: string, worker: typeof WORKER_POOL) => Promise<Database> = (url, worker) =>
    openPostgres(url, {
      statementTimeoutMs: config.databaseStatementTimeoutMs,
      countQueries: config.countQueries,
      ...worker,
    }),
): TenantRoutes | undefined {
  if (config.databaseRouting !== "workers" || db.kind !== "postgres" || !config.databaseUrl) return undefined;
  logger.info("DATABASE_ROUTING=workers: each tenant's requests go to the worker holding its shards");
  return tenantRoutes(db, config.databaseUrl, (url) => open(url, WORKER_POOL), {
    onError: (err, tenantId) =>
      logger.warn(
        { err: (err as Error).message, tenantId },
        "could not read a tenant's placement on the coordinator (is the schema distributed? npm run " +
          "db:distribute): its requests go through the coordinator",
      ),
  });
}

export async function closeServices(s: Services): Promise<void> {
  s.wakeups?.close();
  s.redis?.disconnect();
  await s.routes?.close();
  await s.db.close();
}
