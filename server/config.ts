// Environment → typed configuration. The one place that turns process.env
// into settings (start-up errors and masking read the raw values of a few).
import { statSync } from "node:fs";
import { fromRoot } from "./root.js";
import { maskUrl } from "./secrets.js";
export interface Config {
  port: number;
  host: string;
  databaseUrl: string | undefined;
  /**
   * Where migrations run (like Prisma's `directUrl`): PostgreSQL itself when DATABASE_URL points at
   * a transaction-pooling PgBouncer. Defaults to DATABASE_URL.
   */
  directDatabaseUrl: string | undefined;
  /**
   * Folder of the embedded PGlite database when DATABASE_URL is unset
   * ("memory://" keeps it in memory; default .data/ in the checkout).
   */
  dataDir: string;
  redisUrl: string | undefined;
  /** Seed nodes of a Redis Cluster (REDIS_CLUSTER_NODES="host:port,host:port"); excludes REDIS_URL. */
  redisClusterNodes: { host: string; port: number }[] | undefined;
  /** Port of the Prometheus /metrics listener (unset: no metrics endpoint). */
  metricsPort: number | undefined;
  /**
   * EMBEDDED_SQL_PORT: the embedded database over the PostgreSQL wire protocol on 127.0.0.1, for
   * Prisma Studio and psql while the service owns the folder (0, the default: a free port; `off`: none).
   */
  embeddedSqlPort: number | undefined;
  /** Bind address of the /metrics listener (default HOST). */
  metricsHost: string;
  /**
   * statement_timeout of the service's PostgreSQL connections (0 = none): a statement running longer
   * is cancelled (SQLSTATE 57014 → 503). The migrator and the admin CLI run without it.
   */
  databaseStatementTimeoutMs: number;
  /**
   * DATABASE_ROUTING: where a tenant's request sends its statements on a Citus cluster.
   * "coordinator" (default): to DATABASE_URL, which routes each one to the tenant's worker.
   * "workers": straight to the worker that holds the tenant's shards (server/db/routing.ts).
   */
  databaseRouting: "coordinator" | "workers";
  logLevel: string;
  /**
   * LOG_FORMAT: "pretty" (lines for people) or "json"; undefined
   * = pretty when standard output is a terminal, else JSON.
   */
  logFormat: LogFormat | undefined;
  /** Request body limit in bytes for /public/v1 writes. */
  bodyLimitBytes: number;
  /** How long an Idempotency-Key is remembered. */
  idempotencyTtlSeconds: number;
  /** Ceiling reported in X-RateLimit-* headers of requests whose key could not be authenticated. */
  anonymousPerMinute: number;
  /** CHANGES_MAX_WAITERS: long-polls of the changes feed held at once by this instance (past it: answered at once, with `backoff`). */
  changesMaxWaiters: number;
  /**
   * CHANGES_REREAD_MS: how often the instance probes the feed of each tenant with waiters, whatever
   * the wake-ups do (the longest a change can wait for a waiter whose signal was lost).
   */
  changesRereadMs: number;
  /** Outbound provider request timeout. */
  providerTimeoutMs: number;
  /** Token for the internal admin tRPC procedures (unset: they are disabled). */
  internalToken: string | undefined;
  /** Skip loading the demo tenant on an empty embedded database. */
  noDemo: boolean;
  /** Benchmark aid (BENCH_COUNT_QUERIES=1): count the statements sent to PostgreSQL (bench/proc.ts reads them). */
  countQueries: boolean;
}

/** A configuration value that cannot be used: the message names the variable, the rule and the value given. */
export class ConfigError extends Error {
  override name = "ConfigError";
}

const INT_MAX = 2_147_483_647;

/** An integer variable within [min, max] (decimal digits only: "1e3", "0x10", " 5", "3.0" are refused). */
function int(name: string, value: string | undefined, fallback: number, min = 0, max = INT_MAX): number {
  if (value === undefined || value === "") return fallback;
  const n = /^\d{1,10}$/.test(value) ? Number(value) : NaN;
  if (!(n >= min && n <= max)) throw new ConfigError(`${name} must be ${min}–${max}, got "${value}"`);
  return n;
}

/** The levels LOG_LEVEL accepts (pino's), most to least verbose. */
export const LOG_LEVELS = ["trace", "debug", "info", "warn", "error", "fatal", "silent"] as const;

/** LOG_LEVEL as given (default info), unchecked: for reporting a failure of loadConfig itself. */
export function rawLogLevel(env: NodeJS.ProcessEnv = process.env): string {
  return env.LOG_LEVEL || "info";
}

/** A configured URL as a message shows it: its password masked (server/secrets.ts). */
export const redactUrl = maskUrl;

/** "postgresql://…" (or postgres://) with a valid URL syntax; the host may be empty (a socket via ?host=). */
function postgresUrl(name: string, value: string | undefined): string | undefined {
  if (!value) return undefined;
  let url: URL | undefined;
  try {
    url = new URL(value);
  } catch {
    url = undefined;
  }
  if (!url || (url.protocol !== "postgresql:" && url.protocol !== "postgres:"))
    throw new ConfigError(
      `${name} must be a URL like postgresql://USER:PASSWORD@HOST:PORT/DATABASE, got "${redactUrl(value)}"`,
    );
  return value;
}

/**
 * redis:// or rediss:// (TLS), or the path of a Unix socket (what ioredis accepts as a string), which
 * ioredis can read: it percent-decodes the user name and password (decodeURIComponent), so a "%" that
 * starts no escape would end the start with its URIError's stack instead of this one line.
 */
function redisUrl(value: string | undefined): string | undefined {
  if (!value) return undefined;
  if (value.startsWith("/")) return value;
  let url: URL | undefined;
  try {
    url = new URL(value);
  } catch {
    url = undefined;
  }
  if (!url || (url.protocol !== "redis:" && url.protocol !== "rediss:") || !url.hostname)
    throw new ConfigError(
      `REDIS_URL must be a URL like redis://HOST:PORT (or rediss:// for TLS), got "${redactUrl(value)}"`,
    );
  for (const [part, text] of [
    ["user name", url.username],
    ["password", url.password],
  ] as const) {
    try {
      decodeURIComponent(text);
    } catch {
      throw new ConfigError(
        `REDIS_URL's ${part} is not valid percent-encoding (write a "%" as %25), got "${redactUrl(value)}"`,
      );
    }
  }
  return value;
}

/** The values LOG_FORMAT accepts (unset: pretty on a terminal, JSON otherwise). */
export const LOG_FORMATS = ["pretty", "json"] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

function logFormat(value: string | undefined): LogFormat | undefined {
  if (!value) return undefined;
  if (!(LOG_FORMATS as readonly string[]).includes(value))
    throw new ConfigError(
      `LOG_FORMAT must be one of ${LOG_FORMATS.join(", ")} (unset: pretty on a terminal, JSON otherwise), got ` +
        `"${value}"`,
    );
  return value as LogFormat;
}

function logLevel(value: string | undefined): string {
  if (!value) return "info";
  if (!(LOG_LEVELS as readonly string[]).includes(value))
    throw new ConfigError(`LOG_LEVEL must be one of ${LOG_LEVELS.join(", ")}, got "${value}"`);
  return value;
}

/** The embedded database's folder: "memory://", or a path that is a folder or does not exist yet. */
function dataDir(value: string): string {
  if (value === "memory://") return value;
  let isDir: boolean | undefined;
  try {
    isDir = statSync(value).isDirectory();
  } catch {
    isDir = undefined; // absent (PGlite creates it) or unreadable (reported when opened)
  }
  if (isDir === false) throw new ConfigError(`PGLITE_DATA_DIR must be a folder, got a file: "${value}"`);
  return value;
}

/**
 * "host:port,host:port" → seed nodes; brackets allowed around IPv6 hosts ("[::1]:7000"). A host is a
 * name or an address (letters, digits, ".", "-", "_"); a node the rule refuses is quoted with anything
 * before an "@" masked (a node written as a URL with credentials).
 */
export function parseClusterNodes(value: string): { host: string; port: number }[] {
  const nodes = value
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean)
    .map((item) => {
      const m = /^(?:\[([0-9A-Za-z:.%]+)\]|([0-9A-Za-z._-]+)):(\d{1,5})$/.exec(item);
      const port = m ? Number(m[3]) : NaN;
      if (!m || port < 1 || port > 65535) {
        const shown = item.includes("@") ? `***${item.slice(item.lastIndexOf("@"))}` : item;
        throw new ConfigError(`REDIS_CLUSTER_NODES must be a comma-separated list of host:port, got "${shown}"`);
      }
      return { host: (m[1] ?? m[2])!, port };
    });
  if (nodes.length === 0) throw new ConfigError("REDIS_CLUSTER_NODES is empty");
  return nodes;
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const redisUrlValue = redisUrl(env.REDIS_URL);
  const redisClusterNodes = env.REDIS_CLUSTER_NODES ? parseClusterNodes(env.REDIS_CLUSTER_NODES) : undefined;
  if (redisUrlValue && redisClusterNodes)
    throw new ConfigError("set either REDIS_URL (one Redis) or REDIS_CLUSTER_NODES (a Redis Cluster), not both");
  const metricsPort = env.METRICS_PORT ? int("METRICS_PORT", env.METRICS_PORT, 0, 1, 65535) : undefined;
  const databaseUrl = postgresUrl("DATABASE_URL", env.DATABASE_URL);
  const directDatabaseUrl = postgresUrl("DIRECT_DATABASE_URL", env.DIRECT_DATABASE_URL) ?? databaseUrl;
  return {
    port: int("PORT", env.PORT, 3000, 1, 65535),
    host: env.HOST || "127.0.0.1",
    databaseUrl,
    directDatabaseUrl,
    // a relative PGLITE_DATA_DIR is relative to the working directory; checked only when it is used
    dataDir: databaseUrl ? env.PGLITE_DATA_DIR || fromRoot(".data") : dataDir(env.PGLITE_DATA_DIR || fromRoot(".data")),
    redisUrl: redisUrlValue,
    redisClusterNodes,
    metricsPort,
    embeddedSqlPort:
      env.EMBEDDED_SQL_PORT === "off" ? undefined : int("EMBEDDED_SQL_PORT", env.EMBEDDED_SQL_PORT, 0, 0, 65535),
    metricsHost: env.METRICS_HOST || env.HOST || "127.0.0.1",
    // PostgreSQL's statement_timeout is an int of milliseconds
    databaseStatementTimeoutMs: int(
      "DATABASE_STATEMENT_TIMEOUT_MS",
      env.DATABASE_STATEMENT_TIMEOUT_MS,
      5000,
      0,
      INT_MAX,
    ),
    databaseRouting: databaseRouting(env.DATABASE_ROUTING),
    logLevel: logLevel(env.LOG_LEVEL),
    logFormat: logFormat(env.LOG_FORMAT),
    bodyLimitBytes: int("BODY_LIMIT_BYTES", env.BODY_LIMIT_BYTES, 1024 * 1024, 1, INT_MAX),
    idempotencyTtlSeconds: int("IDEMPOTENCY_TTL_SECONDS", env.IDEMPOTENCY_TTL_SECONDS, 24 * 3600, 1, INT_MAX),
    anonymousPerMinute: int("ANONYMOUS_RATE_LIMIT_PER_MINUTE", env.ANONYMOUS_RATE_LIMIT_PER_MINUTE, 60, 0, INT_MAX),
    changesMaxWaiters: int("CHANGES_MAX_WAITERS", env.CHANGES_MAX_WAITERS, 1000, 0, 1_000_000),
    changesRereadMs: int("CHANGES_REREAD_MS", env.CHANGES_REREAD_MS, 1000, 50, 60_000),
    // a timer's range (a longer one fires at once)
    providerTimeoutMs: int("PROVIDER_TIMEOUT_MS", env.PROVIDER_TIMEOUT_MS, 5000, 1, INT_MAX),
    internalToken: env.INTERNAL_TOKEN || undefined,
    noDemo: env.NO_DEMO === "1" || env.NO_DEMO === "true",
    countQueries: env.BENCH_COUNT_QUERIES === "1",
  };
}

/** "workers" has an effect only on a Citus coordinator (server/bootstrap.ts workerRoutes); elsewhere it is inert. */
function databaseRouting(value: string | undefined): Config["databaseRouting"] {
  if (value === undefined || value === "" || value === "coordinator") return "coordinator";
  if (value !== "workers") throw new ConfigError(`DATABASE_ROUTING must be "coordinator" or "workers", got "${value}"`);
  return value;
}

/**
 * The npm script this process runs under (npm's `npm_lifecycle_event`: "start", "admin", "db:migrate",
 * …), or undefined when it was started otherwise (`node dist/server/main.js`, npx). Read here so that
 * this module stays the one reader of process.env.
 */
export function npmScript(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const event = env.npm_lifecycle_event;
  return event && event !== "npx" ? event : undefined;
}
