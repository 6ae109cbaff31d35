// Environment → typed configuration. The one place that reads process.env.
export interface Config {
  port: number;
  host: string;
  databaseUrl: string | undefined;
  /** Folder of the embedded PGlite database when DATABASE_URL is unset ("memory://" keeps it in memory). */
  dataDir: string;
  redisUrl: string | undefined;
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

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  return {
    port: int("PORT", env.PORT, 3000),
    host: env.HOST || "127.0.0.1",
    databaseUrl: env.DATABASE_URL || undefined,
    dataDir: env.PGLITE_DATA_DIR || ".data",
    redisUrl: env.REDIS_URL || undefined,
    logLevel: env.LOG_LEVEL || "info",
    bodyLimitBytes: int("BODY_LIMIT_BYTES", env.BODY_LIMIT_BYTES, 1024 * 1024),
    idempotencyTtlSeconds: int("IDEMPOTENCY_TTL_SECONDS", env.IDEMPOTENCY_TTL_SECONDS, 24 * 3600),
    anonymousPerMinute: int("ANONYMOUS_RATE_LIMIT_PER_MINUTE", env.ANONYMOUS_RATE_LIMIT_PER_MINUTE, 60),
    providerTimeoutMs: int("PROVIDER_TIMEOUT_MS", env.PROVIDER_TIMEOUT_MS, 5000),
    internalToken: env.INTERNAL_TOKEN || undefined,
    noDemo: env.NO_DEMO === "1" || env.NO_DEMO === "true",
  };
}
