// Environment → typed configuration. The one place that reads process.env.
import { fromRoot } from "./root.js";
export interface Config {
  port: number;
  host: string;
  databaseUrl: string | undefined;
  /**
   * Where migrations run (like Prisma's `directUrl`): PostgreSQL itself when DATABASE_URL points at
   * a transaction-pooling PgBouncer. Defaults to DATABASE_URL.
   */
  directDatabaseUrl: string | undefined;
  /** Folder of the embedded PGlite database when DATABASE_URL is unset ("memory://" keeps it in memory; default .data/ in the checkout). */
  dataDir: string;
  redisUrl: string | undefined;
  /** Seed nodes of a Redis Cluster (REDIS_CLUSTER_NODES="host:port,host:port"); excludes REDIS_URL. */
  redisClusterNodes: { host: string; port: number }[] | undefined;
  /** Port of the Prometheus /metrics listener (unset: no metrics endpoint). */
  metricsPort: number | undefined;
  /** Bind address of the /metrics listener (default HOST). */
  metricsHost: string;
  /**
   * statement_timeout of the service's PostgreSQL connections (0 = none): a statement running longer
   * is cancelled (SQLSTATE 57014 → 503). The migrator and the admin CLI run without it.
   */
  databaseStatementTimeoutMs: number;
  logLevel: string;
  /** Request body limit in bytes for /public/v1 writes. */
  bodyLimitBytes: number;
  /** How long an Idempotency-Key is remembered. */
  idempotencyTtlSeconds: number;
  /** Ceiling reported in X-RateLimit-* headers of requests whose key could not be authenticated. */
  anonymousPerMinute: number;
  /** Outbound provider request timeout. */
  providerTimeoutMs: number;
  /** Token for the internal admin tRPC procedures (unset: they are disabled). */
  internalToken: string | undefined;
  /** Skip loading the demo tenant on an empty embedded database. */
  noDemo: boolean;
}

function int(name: string, value: string | undefined, fallback: number): number {
  if (value === undefined || value === "") return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name} must be a non-negative integer, got "${value}"`);
  return n;
}

/** "host:port,host:port" → seed nodes; brackets allowed around IPv6 hosts ("[::1]:7000"). */
export function parseClusterNodes(value: string): { host: string; port: number }[] {
  const nodes = value
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean)
    .map((item) => {
      const m = /^(?:\[([^\]]+)\]|([^:\s]+)):(\d{1,5})$/.exec(item);
      const port = m ? Number(m[3]) : NaN;
      if (!m || port < 1 || port > 65535) throw new Error(`REDIS_CLUSTER_NODES must be a comma-separated list of host:port, got "${item}"`);
      return { host: (m[1] ?? m[2])!, port };
    });
  if (nodes.length === 0) throw new Error("REDIS_CLUSTER_NODES is empty");
  return nodes;
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const redisUrl = env.REDIS_URL || undefined;
  const redisClusterNodes = env.REDIS_CLUSTER_NODES ? parseClusterNodes(env.REDIS_CLUSTER_NODES) : undefined;
  if (redisUrl && redisClusterNodes) throw new Error("set either REDIS_URL (one Redis) or REDIS_CLUSTER_NODES (a Redis Cluster), not both");
  const metricsPort = env.METRICS_PORT ? int("METRICS_PORT", env.METRICS_PORT, 0) : undefined;
  return {
    port: int("PORT", env.PORT, 3000),
    host: env.HOST || "127.0.0.1",
    databaseUrl: env.DATABASE_URL || undefined,
    directDatabaseUrl: env.DIRECT_DATABASE_URL || env.DATABASE_URL || undefined,
    dataDir: env.PGLITE_DATA_DIR || fromRoot(".data"), // a relative PGLITE_DATA_DIR is relative to the working directory
    redisUrl,
    redisClusterNodes,
    metricsPort,
    metricsHost: env.METRICS_HOST || env.HOST || "127.0.0.1",
    databaseStatementTimeoutMs: int("DATABASE_STATEMENT_TIMEOUT_MS", env.DATABASE_STATEMENT_TIMEOUT_MS, 5000),
    logLevel: env.LOG_LEVEL || "info",
    bodyLimitBytes: int("BODY_LIMIT_BYTES", env.BODY_LIMIT_BYTES, 1024 * 1024),
    idempotencyTtlSeconds: int("IDEMPOTENCY_TTL_SECONDS", env.IDEMPOTENCY_TTL_SECONDS, 24 * 3600),
    anonymousPerMinute: int("ANONYMOUS_RATE_LIMIT_PER_MINUTE", env.ANONYMOUS_RATE_LIMIT_PER_MINUTE, 60),
    providerTimeoutMs: int("PROVIDER_TIMEOUT_MS", env.PROVIDER_TIMEOUT_MS, 5000),
    internalToken: env.INTERNAL_TOKEN || undefined,
    noDemo: env.NO_DEMO === "1" || env.NO_DEMO === "true",
  };
}
