// The database: a Prisma client over a driver adapter, either real PostgreSQL (DATABASE_URL) or
// the embedded PGlite, plus a raw SQL runner for the migrator and hand-tuned queries.
//
// DATABASE_URL may point at PgBouncer in transaction pooling mode (docs/scaling.md): a server
// connection then belongs to this client only for one transaction (or one statement outside a
// transaction), so nothing here keeps state on a connection beyond that: no session SET, no session
// advisory lock, no LISTEN, no temporary table, and no named statement that the pool has not seen
// kept (server/db/prepared.ts: the raw runner's `prepare` statements are named until a connection
// shows it is pooled, then unnamed; @prisma/adapter-pg names statements only when given
// `statementNameGenerator`, which we never pass).
import { PrismaPg } from "@prisma/adapter-pg";
import pg from "pg";
import { PrismaClient } from "../../generated/prisma/client.js";
import { undelegated } from "./delegate.js";
import { rawTypes } from "./arrays.js";
import { TimeoutPool, type StatementTimeoutState } from "./pooler-timeout.js";
import { lockEmbeddedDatabase } from "./pglite-lock.js";
import { gatedPglite, newGate, serveSql, type SqlSocket } from "./sql-socket.js";
import { PreparedStatements, type PreparedState } from "./prepared.js";
import { isoTimestamptz, isoTimesTypes } from "./times.js";
import { inlineValue } from "./literal.js";

/** PGlite's query options for QueryOptions.isoTimes (its parsers, keyed by type oid). */
const PGLITE_ISO_TIMES = { parsers: { [pg.types.builtins.TIMESTAMPTZ]: (text: string) => isoTimestamptz(text) } };

export type Prisma = PrismaClient;
/** A transaction client or the root client: what procedures run their queries on. */
export type Db = Omit<PrismaClient, "$connect" | "$disconnect" | "$on" | "$transaction" | "$extends">;

export interface QueryOptions {
  /** timestamptz columns as ISO 8601 strings (server/db/times.ts), not Dates: for rows only serialized. */
  isoTimes?: boolean;
  /**
   * A hot statement of a bounded set of texts: sent as a named prepared statement (parsed and planned
   * once per connection) where the connections keep them (server/db/prepared.ts), else unnamed — as
   * `unnamed` if given (a cheaper text for an unnamed statement, e.g. a function call whose plan the
   * server caches). Only outside a session: a refused named statement is sent again, unnamed.
   */
  prepare?: boolean | { unnamed: string };
  /**
   * The caller's tenant, for a pool that writes it into the statement's text (a Citus worker's pool
   * under DATABASE_ROUTING=workers: server/db/literal.ts); every other pool ignores it.
   */
  tenant?: string;
}

export interface SqlRunner {
  /** One statement: unnamed, or named where opts.prepare asks and the connections keep them. */
  query<T = Record<string, unknown>>(sql: string, params?: unknown[], opts?: QueryOptions): Promise<T[]>;
  /** Runs a script of several statements (no parameters). */
  exec(sql: string): Promise<void>;
  /** Runs fn on one connection, holding it for the duration (a transaction script: BEGIN … COMMIT). */
  session<T>(fn: (s: SqlRunner) => Promise<T>): Promise<T>;
}

export interface Database {
  kind: "postgres" | "pglite";
  prisma: PrismaClient;
  sql: SqlRunner;
  ping(): Promise<void>;
  /** Pool connections (PostgreSQL only): opened, idle, and queries waiting for one. */
  poolStats?(): { total: number; idle: number; waiting: number };
  /** Named prepared statements of the raw runner (PostgreSQL only): still in use, and how many texts. */
  prepared?(): PreparedState;
  /** The pool's statement_timeout and how it is set (PostgreSQL only; server/db/pooler-timeout.ts). */
  statementTimeout?(): StatementTimeoutState;
  /**
   * The database over the PostgreSQL wire protocol on 127.0.0.1:`port` (0: a free one), for Prisma
   * Studio and psql (PGlite only: it runs inside this process; server/db/sql-socket.ts).
   */
  serveSql?(port: number): Promise<SqlSocket>;
  /** The data folder as a tarball (PGlite only): what openPglite's loadDataDir starts from. */
  dumpDataDir?(): Promise<Blob | File>;
  close(): Promise<void>;
}

/**
 * The longest a writing transaction of the service lasts: Prisma rolls back an interactive transaction
 * still open after it (on every backend), and a write outside one is a single statement, cut by
 * statement_timeout (5 s by default) after a pool checkout of at most 3 s. Lists derive `stableBefore`
 * from it (routers/_lib/list.ts STABLE_LAG_MS): no write stamped earlier can still commit.
 */
export const TRANSACTION_TIMEOUT_MS = 10_000;
const transactionOptions = { maxWait: 15_000, timeout: TRANSACTION_TIMEOUT_MS };

/**
 * Sees every statement sent to the database (SQL text and parameters), from Prisma and from the raw
 * runner alike, before it is sent. A test aid (test/db/tenant-queries.test.ts); off unless given. A
 * "tenant_exec" call (server/db/delegate.ts) is told as the statements it runs, each with `part` (its
 * index in the call, and how many): together one round trip.
 */
export type StatementObserver = (sql: string, params: readonly unknown[], part?: { index: number; of: number }) => void;

/**
 * Per-connection settings of the pool: `statement_timeout` (ms, 0 = none), sent by node-postgres as
 * a startup parameter of every connection, so it needs no SET (nothing that a transaction-mode
 * PgBouncer would lose between transactions). A pooler that refuses the startup parameter (PgBouncer
 * without statement_timeout in `ignore_startup_parameters`) makes the pool fall back to connections
 * without it that set the timeout with SET LOCAL in every transaction (server/db/pooler-timeout.ts).
 */
export function connectionSettings(opts: { statementTimeoutMs?: number }): Pick<pg.PoolConfig, "statement_timeout"> {
  return opts.statementTimeoutMs ? { statement_timeout: opts.statementTimeoutMs } : {};
}

export interface PostgresOptions {
  max?: number;
  /** statement_timeout in ms; unset or 0: none (PostgreSQL's default). */
  statementTimeoutMs?: number;
  observe?: StatementObserver;
  /** The URL is a transaction pooler's (DATABASE_URL ≠ DIRECT_DATABASE_URL): no named statements from the start. */
  pooled?: boolean;
  /** Benchmark aid: count the statements sent (SIGUSR2 prints the count on stderr; config.countQueries). */
  countQueries?: boolean;
  /** Told once, if the connections refuse a named statement (the pool then sends only unnamed ones). */
  onUnnamed?: (reason: string) => void;
  /**
   * Told once, if a pooler refuses the statement_timeout startup parameter (the pool then sets the
   * timeout with SET LOCAL in every transaction; server/db/pooler-timeout.ts).
   */
  onTimeoutFallback?: (reason: string) => void;
  /**
   * Write a statement's tenant (QueryOptions.tenant) into its text (server/db/literal.ts): the pools
   * of DATABASE_ROUTING=workers, where Citus then plans the statement directly on the local shard.
   */
  inlineTenant?: boolean;
  /**
   * Send an UPDATE or DELETE that changed no row once more, in a new snapshot (rerunEmptyWrites
   * below): the pools of DATABASE_ROUTING=workers. Each time it does, `onRerun` is told (a metric).
   */
  rerunEmptyWrites?: boolean;
  onRerun?: () => void;
}

export async function openPostgres(url: string, opts: PostgresOptions = {}): Promise<Database> {
  const pool = new TimeoutPool(
    {
      connectionString: url,
      max: opts.max ?? 10,
      connectionTimeoutMillis: 3_000,
      idleTimeoutMillis: 30_000,
      ...connectionSettings(opts),
      // rerunEmptyWrites is correct under READ COMMITTED only (a statement sent again must get a new
      // snapshot): its connections start at that level whatever the server's default says.
      ...(opts.rerunEmptyWrites ? { options: "-c default_transaction_isolation=read\\ committed" } : {}),
    },
    opts.onTimeoutFallback,
  );
  // An idle client losing its connection (a PostgreSQL restart) must not crash the process.
  pool.on("error", () => {});
  if (opts.countQueries) countQueries(pool);
  if (opts.observe) observePool(pool, opts.observe);
  if (opts.rerunEmptyWrites) rerunEmptyWrites(pool, opts.onRerun);
  const prisma = new PrismaClient({ adapter: new PrismaPg(pool), transactionOptions });
  const prepared = new PreparedStatements(!opts.pooled, opts.onUnnamed);
  const inlineTenant = opts.inlineTenant === true;
  const send = async <T>(
    c: pg.Pool | pg.PoolClient,
    text: string,
    params: unknown[],
    q?: QueryOptions,
    name?: string,
  ) => (await c.query({ name, text, values: params, types: q?.isoTimes ? isoTimesTypes : rawTypes })).rows as T[];
  /** One statement: named where opts.prepare asks and the connections keep them, else unnamed. */
  const sendPrepared = async <T>(
    c: pg.Pool | pg.PoolClient,
    inSession: boolean,
    sql: string,
    params: unknown[],
    opts?: QueryOptions,
  ) => {
    const name = opts?.prepare && !inSession ? prepared.nameOf(sql) : undefined;
    if (name) {
      try {
        return await send<T>(c, sql, params, opts, name);
      } catch (err) {
        if (!prepared.refusedBy(err)) throw err;
      }
    }
    return send<T>(c, typeof opts?.prepare === "object" ? opts.prepare.unnamed : sql, params, opts);
  };
  const runner = (c: pg.Pool | pg.PoolClient, inSession: boolean): SqlRunner => ({
    async query<T>(sql: string, params: unknown[] = [], opts?: QueryOptions) {
      if (inlineTenant && opts?.tenant) {
        // The tenant in the text (server/db/literal.ts): a prepared statement only where that text is
        // named (else its shared text, named: measured cheaper than the per-tenant text planned every time).
        const inlined = inlineValue(sql, params, opts.tenant);
        if (inlined.text !== sql && (!opts.prepare || inSession || prepared.admitsTenantText(inlined.text))) {
          const unnamed =
            typeof opts.prepare === "object" ? inlineValue(opts.prepare.unnamed, params, opts.tenant).text : undefined;
          ({ text: sql, params } = inlined);
          if (unnamed !== undefined) opts = { ...opts, prepare: { unnamed } };
        }
      }
      return sendPrepared<T>(c, inSession, sql, params, opts);
    },
    async exec(sql: string) {
      await c.query(sql);
    },
    async session<T>(fn: (s: SqlRunner) => Promise<T>) {
      const client = await pool.connect();
      try {
        return await fn(runner(client, true));
      } finally {
        client.release();
      }
    },
  });
  const sql = runner(pool, false);
  return {
    kind: "postgres",
    prisma,
    sql,
    async ping() {
      await pool.query("SELECT 1");
    },
    poolStats: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
    prepared: () => prepared.state(),
    statementTimeout: () => pool.statementTimeout(),
    async close() {
      await prisma.$disconnect();
      await pool.end().catch(() => {});
    },
  };
}

type QueryFn = (...args: unknown[]) => unknown;

/** Every connection of `pool`, as it opens, sends its statements through `wrap(its own query())`. */
function wrapQueries(pool: pg.Pool, wrap: (query: QueryFn) => QueryFn): void {
  pool.on("connect", (c) => {
    const client = c as unknown as { query: QueryFn };
    client.query = wrap(client.query.bind(client));
  });
}

/** Benchmark aid (off by default): counts statements sent to PostgreSQL; SIGUSR2 prints the count on stderr. */
/** Statements sent by every pool of this process (one count: DATABASE_ROUTING=workers opens a pool per worker). */
let queriesSent = 0;
let countTold = false;
function countQueries(pool: pg.Pool): void {
  wrapQueries(pool, (query) => (...args) => {
    queriesSent++;
    return query(...args);
  });
  if (countTold) return;
  countTold = true;
  process.on("SIGUSR2", () => process.stderr.write(`bench:queries ${queriesSent}\n`));
}

/**
 * Refuses, loudly, a statement that would run a transaction at another isolation level than READ
 * COMMITTED on a pool that sends empty writes again (a rerun in a REPEATABLE READ or SERIALIZABLE
 * transaction would run in the same snapshot and fix nothing): `BEGIN … ISOLATION LEVEL …`,
 * `SET TRANSACTION …` (Prisma's isolationLevel), `SET SESSION CHARACTERISTICS …`,
 * `SET default_transaction_isolation …`.
 */
export class IsolationRefused extends Error {
  override name = "IsolationRefused";
}
const OTHER_ISOLATION =
  /\bisolation\s+level\s+(?:repeatable\s+read|serializable)\b|\bdefault_transaction_isolation\s*(?:=|to)\s*'?\s*(?:repeatable|serializable)/i;
function isolationRefusal(statement: unknown): IsolationRefused | undefined {
  const text = typeof statement === "string" ? statement : (statement as { text?: unknown } | undefined)?.text;
  if (typeof text === "string" && /isolation/i.test(text) && OTHER_ISOLATION.test(text))
    return new IsolationRefused(
      `a Citus worker's pool runs transactions at READ COMMITTED only (server/db/client.ts rerunEmptyWrites): ` +
        `refused ${text.slice(0, 80)}`,
    );
  return undefined;
}

/**
 * An UPDATE or DELETE that changed no row is sent once more, on the same connection (the pools of
 * DATABASE_ROUTING=workers). On a Citus node a write routed by Citus takes its shard group's metadata
 * lock in the executor, after the statement's snapshot was taken. When a shard split
 * (isolate_tenant_to_new_shard) commits while the write waits for that lock, Citus reroutes the write
 * to the new shard and, the shard being on this node, runs it in that earlier snapshot, which does not
 * see the rows the split copied there: it changes nothing, and an update of a row the request has just
 * read finds none (Prisma's P2025 → a 500; an updateMany's count 0 → a 404). Sent again, it runs in a
 * new snapshot. Safe for every such statement: one that changed no row did nothing (its statement
 * triggers saw no rows), so sending it again is the same statement a moment later, as a client's
 * retry would be, and only under READ COMMITTED (a new statement, a new snapshot): the pool's
 * connections start at that level and a statement asking for another one is refused
 * (isolationRefusal). A "tenant_exec" call is a SELECT: its writes are not sent again here. Reads
 * take no such lock. Each rerun is counted (/metrics: crm_db_empty_writes_rerun_total).
 */
function rerunEmptyWrites(pool: pg.Pool, onRerun: () => void = () => {}): void {
  const empty = (r: unknown) => {
    if (!r || Array.isArray(r)) return false;
    const { command, rowCount } = r as { command?: unknown; rowCount?: unknown };
    return (command === "UPDATE" || command === "DELETE") && rowCount === 0;
  };
  wrapQueries(pool, (query) => (...args) => {
    const refused = isolationRefusal(args[0]);
    if (refused) {
      const done = args.at(-1);
      if (typeof done === "function") return void done(refused);
      return Promise.reject(refused);
    }
    const last = args.at(-1);
    if (typeof last === "function") {
      // The callback form (pg.Pool's own query()).
      const rest = args.slice(0, -1);
      return query(...rest, (err: unknown, r: unknown) => {
        if (err || !empty(r)) return last(err, r);
        onRerun();
        return query(...rest, last);
      });
    }
    const sent = query(...args);
    if (!(sent instanceof Promise)) return sent; // a submittable (a cursor, a stream): as it is
    return sent.then((r: unknown) => {
      if (!empty(r)) return r;
      onRerun();
      return query(...args);
    });
  });
}

/** pg's query(text | {text, values}, values?) → (text, values). */
function statementOf(args: unknown[]): [string, readonly unknown[]] {
  const [first, second] = args as [unknown, unknown];
  if (typeof first === "string") return [first, Array.isArray(second) ? second : []];
  const config = (first ?? {}) as { text?: string; values?: unknown[] };
  return [config.text ?? "", config.values ?? (Array.isArray(second) ? second : [])];
}

/** Tells `observe` of a statement sent, or of each statement a "tenant_exec" call runs (server/db/delegate.ts). */
function report(observe: StatementObserver, args: unknown[]): void {
  const [text, params] = statementOf(args);
  const parts = undelegated(text, params);
  if (!parts) {
    observe(text, params);
    return;
  }
  for (const [index, [t, p]] of parts.entries()) observe(t, p, { index, of: parts.length });
}

function observePool(pool: pg.Pool, observe: StatementObserver): void {
  wrapQueries(pool, (query) => (...args) => {
    report(observe, args);
    return query(...args);
  });
}

/**
 * The PGlite instance as the adapter and the raw runner use it, with query() (also inside
 * transactions) reporting to the observer. Everything else is the instance's own, bound to it.
 */
function observedPglite<T extends object>(lite: T, observe: StatementObserver): T {
  const wrap = <O extends object>(target: O, inner: boolean): O =>
    new Proxy(target, {
      get(t, key) {
        const value = Reflect.get(t, key, t);
        if (typeof value !== "function") return value;
        if (key === "query")
          return (...args: unknown[]) => {
            report(observe, args);
            return value.apply(t, args);
          };
        if (key === "exec")
          return (...args: unknown[]) => {
            observe(String(args[0]), []);
            return value.apply(t, args);
          };
        if (key === "transaction" && !inner)
          return (fn: (tx: object) => unknown) => value.call(t, (tx: object) => fn(wrap(tx, true)));
        return value.bind(t);
      },
    });
  return wrap(lite, false);
}

/**
 * `sharedBuffers`: PostgreSQL's shared_buffers for this instance (e.g. "16MB"); unset: PGlite's
 * default (128 MB). openDatabase (the service, the CLI) passes PGLITE_SHARED_BUFFERS.
 */
export async function openPglite(
  dataDir: string,
  opts: {
    observe?: StatementObserver;
    sharedBuffers?: string;
    /** A data folder to start from (PGlite's dumpDataDir tarball; the tests' migrated snapshot). */
    loadDataDir?: Blob;
  } = {},
): Promise<Database> {
  // One process per folder (server/db/pglite-lock.ts): a second one refuses here, before loading PGlite.
  const lock = dataDir === "memory://" ? undefined : lockEmbeddedDatabase(dataDir);
  // Loaded only here: importing PGlite costs ~50 MB of RSS that a PostgreSQL deployment never uses.
  const [{ PGlite }, { btree_gin }, { btree_gist }, { pg_trgm }, { PrismaPGlite }] = await Promise.all([
    import("@electric-sql/pglite"),
    import("@electric-sql/pglite/contrib/btree_gin"),
    import("@electric-sql/pglite/contrib/btree_gist"),
    import("@electric-sql/pglite/contrib/pg_trgm"),
    import("pglite-prisma-adapter"),
  ]);
  // shared_buffers lives in this process's WebAssembly memory and is touched as pages are read:
  // the service's 16 MB (instead of 128 MB) keeps it ~100 MiB smaller (docs/decisions/performance.md,
  // "Embedded database memory"). Tests keep PGlite's default.
  const instance = await PGlite.create({
    dataDir: dataDir === "memory://" ? undefined : dataDir,
    loadDataDir: opts.loadDataDir,
    extensions: { btree_gin, btree_gist, pg_trgm },
    ...(opts.sharedBuffers
      ? { startParams: [...PGlite.defaultStartParams, "-c", `shared_buffers=${opts.sharedBuffers}`] }
      : {}),
  }).catch((err) => {
    lock?.release();
    throw err;
  });
  // The service's side of the gate it shares with the SQL socket's client (server/db/sql-socket.ts).
  const gate = newGate();
  const lite = gatedPglite(opts.observe ? observedPglite(instance, opts.observe) : instance, gate);
  const prisma = new PrismaClient({ adapter: new PrismaPGlite(lite), transactionOptions });
  const sql: SqlRunner = {
    async query<T>(q: string, params: unknown[] = [], opts?: QueryOptions) {
      // In-process: no statement to keep; a prepare statement's cheaper unnamed text where it has one.
      const text = typeof opts?.prepare === "object" ? opts.prepare.unnamed : q;
      return (await lite.query(text, params, opts?.isoTimes ? PGLITE_ISO_TIMES : undefined)).rows as T[];
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
    dumpDataDir: () => instance.dumpDataDir("none"),
    serveSql: (port) => serveSql(instance, gate, port),
    async close() {
      await prisma.$disconnect();
      await lite.close();
      lock?.release();
    },
  };
}

/** shared_buffers of the embedded database of the service and the CLI. */
export const PGLITE_SHARED_BUFFERS = "16MB";

/**
 * The configured database. `databaseStatementTimeoutMs` applies to PostgreSQL only: PGlite runs in
 * this process, one statement at a time, and has no way to interrupt one (no statement_timeout).
 */
export function openDatabase(
  cfg: {
    databaseUrl?: string;
    directDatabaseUrl?: string;
    dataDir: string;
    databaseStatementTimeoutMs?: number;
    countQueries?: boolean;
  },
  opts: Pick<PostgresOptions, "onUnnamed" | "onTimeoutFallback"> = {},
): Promise<Database> {
  return cfg.databaseUrl
    ? openPostgres(cfg.databaseUrl, {
        statementTimeoutMs: cfg.databaseStatementTimeoutMs,
        countQueries: cfg.countQueries,
        pooled: Boolean(cfg.directDatabaseUrl && cfg.directDatabaseUrl !== cfg.databaseUrl),
        onUnnamed: opts.onUnnamed,
        onTimeoutFallback: opts.onTimeoutFallback,
      })
    : openPglite(cfg.dataDir, { sharedBuffers: PGLITE_SHARED_BUFFERS });
}
