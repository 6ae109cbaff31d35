// The test suite on a Citus cluster: when DATABASE_URL (its server: DIRECT_DATABASE_URL)
// is a Citus coordinator, each test file's fresh database is created on the coordinator and on every
// worker, with the extension and the workers registered (as ../shared/citus/cluster.sh db does), then
// migrated and distributed by `distribute()` — the same code as `npm run db:distribute`.
import pg from "pg";
import { nodeUrl as routedUrl } from "../../server/db/routing.js";

export interface Cluster {
  /** The coordinator's address as the test URLs name it. */
  coordinator: { host: string; port: number };
  workers: { host: string; port: number }[];
}

/** Runs statements on a node, in a session of their own. */
export async function onNode(url: string, sql: string | string[]): Promise<void> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    for (const s of Array.isArray(sql) ? sql : [sql]) await c.query(s);
  } finally {
    await c.end();
  }
}

/**
 * The URL of `database` on `node`, with `base`'s user and options (the service's own node URL, server/db/routing.ts).
 */
export const nodeUrl = (base: string, node: { host: string; port: number }, database: string) => {
  const url = new URL(routedUrl(base, node.host, node.port));
  url.pathname = `/${database}`;
  return url.toString();
};

/** The URL of `url`'s own database on `node` (every test database exists on every node). */
export const onSameDatabase = (url: string, node: { host: string; port: number }) =>
  nodeUrl(url, node, new URL(url).pathname.slice(1));

let found: Promise<Cluster | null> | undefined;

/** The Citus cluster behind `baseUrl` (read once), or null on plain PostgreSQL. */
export function citusCluster(baseUrl: string): Promise<Cluster | null> {
  found ??= (async () => {
    const c = new pg.Client({ connectionString: baseUrl });
    await c.connect();
    try {
      const ext = await c.query(`SELECT 1 FROM pg_extension WHERE extname = 'citus'`);
      if (!ext.rowCount) return null;
      const workers = await c.query<{ host: string; port: number }>(
        `SELECT nodename AS host, nodeport AS port FROM pg_dist_node WHERE groupid <> 0 AND noderole = 'primary'
         ORDER BY nodeid`,
      );
      const url = new URL(baseUrl);
      return { coordinator: { host: url.hostname, port: Number(url.port || 5432) }, workers: workers.rows };
    } finally {
      await c.end();
    }
  })();
  return found;
}

/** Creates database `name` on every node of the cluster, with Citus and the workers registered. */
export async function createClusterDatabase(baseUrl: string, cluster: Cluster, name: string): Promise<void> {
  const nodes = [cluster.coordinator, ...cluster.workers];
  await Promise.all(nodes.map((n) => onNode(nodeUrl(baseUrl, n, "postgres"), `CREATE DATABASE ${name}`)));
  await Promise.all(nodes.map((n) => onNode(nodeUrl(baseUrl, n, name), "CREATE EXTENSION IF NOT EXISTS citus")));
  // One registration at a time across the test processes: citus_add_node syncs the roles, which are
  // shared by every database of a node, and two at once fail with "tuple concurrently updated". The
  // lock is an advisory lock in the coordinator's "postgres" database (advisory locks are per database).
  const gate = new pg.Client({ connectionString: nodeUrl(baseUrl, cluster.coordinator, "postgres") });
  await gate.connect();
  try {
    await gate.query("SELECT pg_advisory_lock($1)", [REGISTRATION_LOCK]);
    await onNode(nodeUrl(baseUrl, cluster.coordinator, name), [
      `SELECT citus_set_coordinator_host('${cluster.coordinator.host}', ${cluster.coordinator.port})`,
      ...cluster.workers.map((w) => `SELECT citus_add_node('${w.host}', ${w.port})`),
    ]);
  } finally {
    await gate.end(); // ends the session, and its lock
  }
}

/** The advisory lock key of createClusterDatabase's node registration. */
const REGISTRATION_LOCK = 7_245_026;

/** Drops database `name` on every node. */
export async function dropClusterDatabase(baseUrl: string, cluster: Cluster, name: string): Promise<void> {
  const nodes = [cluster.coordinator, ...cluster.workers];
  await Promise.all(
    nodes.map((n) =>
      onNode(nodeUrl(baseUrl, n, "postgres"), `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => {}),
    ),
  );
}

/** Shards per distributed table in the tests' databases (few: each test file distributes its own). */
export const TEST_SHARD_COUNT = Number(process.env.TEST_CITUS_SHARDS || 4);

/** Runs one query and returns its rows (a pool, a client or Prisma's raw query, as the test has it). */
export type RowsOf = <R>(sql: string, params?: unknown[]) => Promise<R[]>;

/**
 * The lock waits of this database: each waiting backend and the backends it waits for, by their pids
 * on the node they run on. On one PostgreSQL that is pg_blocking_pids. On a Citus coordinator a
 * statement's row locks are taken on the worker that holds the shard, where the coordinator's
 * pg_blocking_pids does not see them: citus_lock_waits has the cluster's wait edges, each end named
 * by the global pid of its transaction (nodeid × 10^10 + pid): a distributed transaction's is that of
 * the coordinator's backend that started it, a session's on a worker that worker's backend.
 */
export async function lockWaits(rows: RowsOf): Promise<{ pid: number; blockers: number[] }[]> {
  const [ext] = await rows<{ citus: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') AS citus`,
  );
  const found = ext?.citus
    ? await rows<{ pid: number; blockers: number[] }>(
        `SELECT (w.waiting_gpid % 10000000000)::int AS pid,
         array_agg(DISTINCT (w.blocking_gpid % 10000000000)::int) AS blockers
           FROM citus_lock_waits w
          WHERE w.waiting_gpid IN (SELECT a.global_pid FROM citus_stat_activity a WHERE a.datname = current_database())
          GROUP BY 1`,
      )
    : await rows<{ pid: number; blockers: number[] }>(
        `SELECT pid, pg_blocking_pids(pid) AS blockers FROM pg_stat_activity
          WHERE datname = current_database() AND cardinality(pg_blocking_pids(pid)) > 0`,
      );
  return found.map((r) => ({ pid: Number(r.pid), blockers: r.blockers.map(Number).sort((a, b) => a - b) }));
}

/**
 * Where a session takes the same row locks as the service's statements for `tenantId`: the URL of the
 * node and the name of each of `tables` there. On a Citus coordinator: the worker with the tenant's
 * shards (every distributed table is co-located) and, by name, the tenant's shard of a distributed
 * table or that worker's own copy of a reference table — plain PostgreSQL tables, locked as such (a
 * Citus query on the worker would lock a reference table's whole shard, and join a distributed
 * transaction that Citus's own deadlock detector may pick as its victim). On one PostgreSQL: `url`
 * and the tables themselves.
 */
export async function tenantPlacements<T extends string>(
  url: string,
  tenantId: string,
  tables: readonly T[],
): Promise<{ url: string; table: Record<T, string> }> {
  const quoted = (name: string) => `"${name.replaceAll('"', '""')}"`;
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const ext = await c.query(`SELECT 1 FROM pg_extension WHERE extname = 'citus'`);
    if (!ext.rowCount)
      return { url, table: Object.fromEntries(tables.map((t) => [t, quoted(t)])) as Record<T, string> };
    const { rows } = await c.query<{ host: string; port: number }>(
      `SELECT n.nodename AS host, n.nodeport AS port
         FROM pg_dist_placement p JOIN pg_dist_node n ON n.groupid = p.groupid
        WHERE p.shardid = get_shard_id_for_distribution_column('"ChangeLog"', $1::uuid)`,
      [tenantId],
    );
    const table = {} as Record<T, string>;
    for (const t of tables) {
      const shard = await c.query<{ id: string }>(
        `SELECT (CASE WHEN p.partmethod = 'n' THEN get_shard_id_for_distribution_column(p.logicalrelid)
                      ELSE get_shard_id_for_distribution_column(p.logicalrelid, $2::uuid) END)::text AS id
           FROM pg_dist_partition p WHERE p.logicalrelid = $1::regclass`,
        [quoted(t), tenantId],
      );
      table[t] = quoted(`${t}_${shard.rows[0]!.id}`);
    }
    const at = new URL(url);
    at.hostname = rows[0]!.host;
    at.port = String(rows[0]!.port);
    return { url: at.toString(), table };
  } finally {
    await c.end();
  }
}

/** The URL of the node that holds `tenantId`'s rows (see tenantPlacements): on one PostgreSQL `url`. */
export const tenantNodeUrl = async (url: string, tenantId: string) => (await tenantPlacements(url, tenantId, [])).url;
