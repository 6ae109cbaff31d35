// The database: a Prisma client over a driver adapter, either real PostgreSQL (DATABASE_URL) or
// the embedded PGlite, plus a raw SQL runner for the migrator and hand-tuned queries.
import { PrismaPg } from "@prisma/adapter-pg";
import pg from "pg";
import { PrismaClient } from "../../generated/prisma/client.js";

export type Prisma = PrismaClient;
/** A transaction client or the root client: what procedures run their queries on. */
export type Db = Omit<PrismaClient, "$connect" | "$disconnect" | "$on" | "$transaction" | "$extends">;

export interface SqlRunner {
  /** `name`: prepare once per connection and reuse (PostgreSQL; PGlite ignores it) — for per-request statements. */
  query<T = Record<string, unknown>>(sql: string, params?: unknown[], name?: string): Promise<T[]>;
  /** Runs a script of several statements (no parameters). */
  exec(sql: string): Promise<void>;
  /** Runs fn on one connection, holding it for the duration (a session for advisory locks). */
  session<T>(fn: (s: SqlRunner) => Promise<T>): Promise<T>;
}

export interface Database {
  kind: "postgres" | "pglite";
  prisma: PrismaClient;
  sql: SqlRunner;
  ping(): Promise<void>;
  close(): Promise<void>;
}

const transactionOptions = { maxWait: 15_000, timeout: 30_000 };

export async function openPostgres(url: string, opts: { max?: number } = {}): Promise<Database> {
  const pool = new pg.Pool({
    connectionString: url,
    max: opts.max ?? 10,
    connectionTimeoutMillis: 3_000,
    idleTimeoutMillis: 30_000,
  });
  // An idle client losing its connection (a PostgreSQL restart) must not crash the process.
  pool.on("error", () => {});
  if (process.env.BENCH_COUNT_QUERIES === "1") countQueries(pool);
  const prisma = new PrismaClient({ adapter: new PrismaPg(pool), transactionOptions });
  const runner = (c: pg.Pool | pg.PoolClient): SqlRunner => ({
    async query<T>(sql: string, params: unknown[] = [], name?: string) {
      return (await (name ? c.query({ name, text: sql, values: params }) : c.query(sql, params))).rows as T[];
    },
    async exec(sql: string) {
      await c.query(sql);
    },
    async session<T>(fn: (s: SqlRunner) => Promise<T>) {
      const client = await pool.connect();
      try {
        return await fn(runner(client));
      } finally {
        client.release();
      }
    },
  });
  const sql = runner(pool);
  return {
    kind: "postgres",
    prisma,
    sql,
    async ping() {
      await pool.query("SELECT 1");
    },
    async close() {
      await prisma.$disconnect();
      await pool.end().catch(() => {});
    },
  };
}

/** Benchmark aid (off by default): counts statements sent to PostgreSQL; SIGUSR2 prints the count on stderr. */
function countQueries(pool: pg.Pool): void {
  let n = 0;
  pool.on("connect", (c: any) => {
    const query = c.query.bind(c);
    c.query = (...args: unknown[]) => (n++, query(...args));
  });
  process.on("SIGUSR2", () => process.stderr.write(`bench:queries ${n}\n`));
}

export async function openPglite(dataDir: string): Promise<Database> {
  // Loaded only here: importing PGlite costs ~50 MB of RSS that a PostgreSQL deployment never uses.
  const [{ PGlite }, { btree_gist }, { pg_trgm }, { PrismaPGlite }] = await Promise.all([
    import("@electric-sql/pglite"),
    import("@electric-sql/pglite/contrib/btree_gist"),
    import("@electric-sql/pglite/contrib/pg_trgm"),
    import("pglite-prisma-adapter"),
  ]);
  const lite = await PGlite.create({ dataDir: dataDir === "memory://" ? undefined : dataDir, extensions: { btree_gist, pg_trgm } });
  const prisma = new PrismaClient({ adapter: new PrismaPGlite(lite), transactionOptions });
  const sql: SqlRunner = {
    async query<T>(q: string, params: unknown[] = []) {
      return (await lite.query(q, params)).rows as T[];
    },
    async exec(q: string) {
      await lite.exec(q);
    },
    async session<T>(fn: (s: SqlRunner) => Promise<T>) {
      return fn(sql);
    },
  };
  return {
    kind: "pglite",
    prisma,
    sql,
    async ping() {
      await lite.query("SELECT 1");
    },
    async close() {
      await prisma.$disconnect();
      await lite.close();
    },
  };
}

export function openDatabase(cfg: { databaseUrl?: string; dataDir: string }): Promise<Database> {
  return cfg.databaseUrl ? openPostgres(cfg.databaseUrl) : openPglite(cfg.dataDir);
}
