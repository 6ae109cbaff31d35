// Benchmark settings, all from the environment (see bench/README.md).
import os from "node:os";
import { parseSize } from "./size.js";

function num(name: string, fallback: number): number {
  const v = process.env[name];
  if (v === undefined || v === "") return fallback;
  const n = Number(v);
  if (!Number.isFinite(n) || n < 0) throw new Error(`${name} must be a non-negative number, got "${v}"`);
  return n;
}

const quick = process.env.BENCH_QUICK === "1";

export const benchConfig = {
  quick,
  /** Measured seconds per (scenario, connections) run. */
  duration: num("BENCH_DURATION", quick ? 2 : 6),
  /** Warm-up seconds before each scenario's first measured run (at 8 connections, discarded). */
  warmup: num("BENCH_WARMUP", quick ? 1 : 2),
  connections: (process.env.BENCH_CONNECTIONS ?? (quick ? "1,32" : "1,8,32"))
    .split(",")
    .map(Number)
    .filter((n) => n > 0),
  /** Comma-separated scenario names to run (default: all). */
  only: process.env.BENCH_ONLY ? new Set(process.env.BENCH_ONLY.split(",").map((s) => s.trim())) : undefined,
  /** Sequential requests per scenario used to count database round trips. */
  countRequests: num("BENCH_COUNT_REQUESTS", quick ? 5 : 20),
  /** Server of the benchmark database (a fresh database is created on it). */
  pgBase: process.env.DATABASE_URL || "postgresql://postgres@127.0.0.1:5432/postgres",
  dbName: process.env.BENCH_DB_NAME || "crm_bench",
  redisUrl: process.env.REDIS_URL || "redis://127.0.0.1:6379",
  servicePort: num("BENCH_SERVICE_PORT", 3901),
  baselinePort: num("BENCH_BASELINE_PORT", 3902),
  /** Keep the benchmark database afterwards (default: dropped). */
  keepDb: process.env.BENCH_KEEP_DB === "1",
  /** Reuse an already loaded benchmark database (development; needs BENCH_KEEP_DB=1 on the run that loaded it). */
  reuseDb: process.env.BENCH_REUSE_DB === "1",
  /** The profiling phase after the measured runs (BENCH_PROFILE=0 skips it). */
  profile: process.env.BENCH_PROFILE !== "0",
  /** Seconds per scenario of the profiling phase. */
  profileSeconds: num("BENCH_PROFILE_SECONDS", quick ? 1 : 3),
  /** Extra node flags for the service process (e.g. "--max-old-space-size=160"). */
  nodeFlags: (process.env.BENCH_NODE_FLAGS ?? "").split(/\s+/).filter(Boolean),
  /** Lead counts of the sized tenants (BENCH_SIZES=10k,100k,1m; BENCH_SCALE=1m adds a size). */
  sizes: [
    ...new Set(
      [
        ...(process.env.BENCH_SIZES ?? "10k,100k,1m").split(","),
        ...(process.env.BENCH_SCALE ? [process.env.BENCH_SCALE] : []),
      ]
        .filter((x) => x.trim() !== "")
        .map(parseSize),
    ),
  ].sort((a, b) => a - b),
  /** The size of the tenant the service/baseline matrix runs on (default: the largest of BENCH_SIZES). */
  matrixSize: process.env.BENCH_MATRIX_SIZE ? parseSize(process.env.BENCH_MATRIX_SIZE) : undefined,
  /** Measured seconds per (scenario, size) run of the growth table. */
  sizeDuration: num("BENCH_SIZE_DURATION", quick ? 2 : 5),
  /** Connections of the growth table's runs. */
  sizeConnections: num("BENCH_SIZE_CONNECTIONS", 8),
  /** Where the results file goes (default bench/results/<date>.md). */
  out: process.env.BENCH_OUT,
  cores: os.cpus().length,
};

export type BenchConfig = typeof benchConfig;

export function dbUrl(base: string, name: string): string {
  const u = new URL(base);
  u.pathname = `/${name}`;
  return u.toString();
}
