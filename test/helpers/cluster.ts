// The test suite on a Citus cluster (issue 26): when DATABASE_URL (its server: DIRECT_DATABASE_URL)
// is a Citus coordinator, each test file's fresh database is created on the coordinator and on every
// worker, with the extension and the workers registered (as ../shared/citus/cluster.sh db does), then
// migrated and distributed by `distribute()` — the same code as `npm run db:distribute`.
import pg from "pg";

export interface Cluster {
  /** The coordinator's address as the test URLs name it. */
  coordinator: { host: string; port: number };
  workers: { host: string; port: number }[];
}

async function onNode(url: string, sql: string | string[]): Promise<void> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    for (const s of Array.isArray(sql) ? sql : [sql]) await c.query(s);
  } finally {
    await c.end();
  }
}

const nodeUrl = (base: string, node: { host: string; port: number }, database: string) => {
  const url = new URL(base);
  url.hostname = node.host;
  url.port = String(node.port);
  url.pathname = `/${database}`;
  return url.toString();
};

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
        `SELECT nodename AS host, nodeport AS port FROM pg_dist_node WHERE groupid <> 0 AND noderole = 'primary' ORDER BY nodeid`,
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
  await onNode(nodeUrl(baseUrl, cluster.coordinator, name), [
    `SELECT citus_set_coordinator_host('${cluster.coordinator.host}', ${cluster.coordinator.port})`,
    ...cluster.workers.map((w) => `SELECT citus_add_node('${w.host}', ${w.port})`),
  ]);
}

/** Drops database `name` on every node. */
export async function dropClusterDatabase(baseUrl: string, cluster: Cluster, name: string): Promise<void> {
  const nodes = [cluster.coordinator, ...cluster.workers];
  await Promise.all(nodes.map((n) => onNode(nodeUrl(baseUrl, n, "postgres"), `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => {})));
}

/** Shards per distributed table in the tests' databases (few: each test file distributes its own). */
export const TEST_SHARD_COUNT = Number(process.env.TEST_CITUS_SHARDS || 4);
