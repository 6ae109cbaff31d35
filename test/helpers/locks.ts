// Proof that statements wait on a lock, read from the server instead of guessed from the time that
// passed: a test that holds a lock and starts requests waits here until they are queued behind it
// (then asserts that none has finished), instead of sleeping a fixed time and hoping they got there.
import pg from "pg";
import { citusCluster, onSameDatabase } from "./cluster.js";
import { directBaseUrl } from "./template.js";

export interface LockWaiter {
  /** host:port of the node the backend runs on (on Citus: the coordinator or a worker). */
  node: string;
  pid: number;
  /** pg_locks' locktype of the lock it waits for ("advisory", "transactionid", "tuple", "relation", …). */
  locktype: string | null;
  /** The start of its statement. */
  query: string;
}

export interface LockWaitOptions {
  /** Count only waits for this kind of lock (pg_locks.locktype). */
  locktype?: string;
  /** Give up after this long (default 20 s: a test's 30 s leave room for the error's report). */
  timeoutMs?: number;
  /** Between two looks (default 25 ms). */
  intervalMs?: number;
}

/**
 * Waits until at least `n` backends of the test database wait on a lock (pg_stat_activity's
 * wait_event_type 'Lock', with pg_locks' locktype of the lock not granted) and returns them. On
 * Citus it looks on every node — the coordinator and each worker, in the same database — since a
 * statement's locks are taken where its rows are (with DATABASE_ROUTING=workers the waiting backend
 * is the worker's own). `db` is a test database (its directUrl: PostgreSQL itself, also behind
 * PgBouncer) or a URL of one; the test's own looking connections are not counted. Throws past the
 * deadline with what every backend of the database was doing. PostgreSQL and Citus only.
 */
export async function waitForLockWaiters(
  db: string | { directUrl?: string; url?: string },
  n: number,
  opts: LockWaitOptions = {},
): Promise<LockWaiter[]> {
  const url = typeof db === "string" ? db : (db.directUrl ?? db.url);
  if (!url)
    throw new Error("waitForLockWaiters: a PostgreSQL test database is needed (PGlite runs one statement at a time)");
  const cluster = await citusCluster(directBaseUrl() ?? url);
  const here = new URL(url);
  const nodes = cluster
    ? [cluster.coordinator, ...cluster.workers]
    : [{ host: here.hostname, port: Number(here.port || 5432) }];
  const clients = await Promise.all(
    nodes.map(async (node) => {
      const c = new pg.Client({ connectionString: cluster ? onSameDatabase(url, node) : url });
      c.on("error", () => {});
      await c.connect();
      return { node: `${node.host}:${node.port}`, c };
    }),
  );
  try {
    const deadline = Date.now() + (opts.timeoutMs ?? 20_000);
    for (;;) {
      const waiting = (await Promise.all(clients.map(({ node, c }) => waitersOn(node, c)))).flat();
      const counted = opts.locktype === undefined ? waiting : waiting.filter((w) => w.locktype === opts.locktype);
      if (counted.length >= n) return counted;
      if (Date.now() >= deadline) {
        const activity = await Promise.all(clients.map(({ node, c }) => activityOn(node, c)));
        throw new Error(
          `fewer than ${n} backends waiting on ${opts.locktype ?? "a"} lock after ${opts.timeoutMs ?? 20_000} ms ` +
            `(${counted.length}): ${JSON.stringify(activity.flat())}`,
        );
      }
      await new Promise((r) => setTimeout(r, opts.intervalMs ?? 25));
    }
  } finally {
    await Promise.all(clients.map(({ c }) => c.end().catch(() => {})));
  }
}

async function waitersOn(node: string, c: pg.Client): Promise<LockWaiter[]> {
  const { rows } = await c.query<{ pid: number; locktype: string | null; query: string }>(
    `SELECT a.pid, (SELECT l.locktype FROM pg_locks l WHERE l.pid = a.pid AND NOT l.granted LIMIT 1) AS locktype,
            left(a.query, 200) AS query
       FROM pg_stat_activity a
      WHERE a.datname = current_database() AND a.wait_event_type = 'Lock' AND a.pid <> pg_backend_pid()`,
  );
  return rows.map((r) => ({ node, pid: r.pid, locktype: r.locktype, query: r.query }));
}

async function activityOn(node: string, c: pg.Client) {
  const { rows } = await c.query(
    `SELECT pid, state, wait_event_type, wait_event, left(query, 120) AS query FROM pg_stat_activity
      WHERE datname = current_database() AND pid <> pg_backend_pid()`,
  );
  return rows.map((r) => ({ node, ...r }));
}
