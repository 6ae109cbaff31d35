// The migrated template database of a test run (test/helpers/global-setup.ts) and the copies each
// test file's freshDatabase() makes of it, on PostgreSQL and on every node of a Citus cluster.
import { randomBytes } from "node:crypto";
import { openPostgres } from "../../server/db/client.js";
import { distribute } from "../../server/db/distribute.js";
import { migrateDirect } from "../../server/db/migrate.js";
import { citusCluster, createClusterDatabase, dropClusterDatabase, nodeUrl, onNode, TEST_SHARD_COUNT, type Cluster } from "./cluster.js";

/** The server's URL for CREATE/DROP DATABASE and migrations: DIRECT_DATABASE_URL, else DATABASE_URL. */
export const directBaseUrl = () => process.env.DIRECT_DATABASE_URL || process.env.DATABASE_URL;

/** `base` with another database name. */
export function withDatabase(base: string, name: string): string {
  const url = new URL(base);
  url.pathname = `/${name}`;
  return url.toString();
}

/** Runs one statement on the server itself (CREATE/DROP DATABASE never go through the pooler). */
export const onServer = (sql: string) => onNode(directBaseUrl()!, sql);

export interface Template {
  name: string;
  cluster: Cluster | null;
}

/** A migrated (and on Citus distributed) database to copy, made once per run. */
export async function createTemplateDatabase(): Promise<Template> {
  const base = directBaseUrl()!;
  const name = `test_template_${randomBytes(5).toString("hex")}`;
  const cluster = await citusCluster(base);
  if (cluster) await createClusterDatabase(base, cluster, name);
  else await onServer(`CREATE DATABASE ${name}`);
  const url = withDatabase(base, name);
  const db = await openPostgres(url, { max: 1 });
  try {
    await migrateDirect({ databaseUrl: url, directDatabaseUrl: url }, db);
    if (cluster) await distribute(db.sql, { shardCount: TEST_SHARD_COUNT });
  } finally {
    await db.close();
  }
  return { name, cluster };
}

/** A new database for one test file, copied from the template (on every node of a cluster). */
export async function copyTemplate(template: Template): Promise<string> {
  const base = directBaseUrl()!;
  const name = `test_${randomBytes(6).toString("hex")}`;
  const nodes = template.cluster ? [template.cluster.coordinator, ...template.cluster.workers] : [null];
  await Promise.all(nodes.map((n) => onNode(n ? nodeUrl(base, n, "postgres") : base, `CREATE DATABASE ${name} TEMPLATE ${template.name}`)));
  return name;
}

/** Drops a test database (on every node of a cluster). */
export async function dropDatabase(cluster: Cluster | null, name: string): Promise<void> {
  if (cluster) await dropClusterDatabase(directBaseUrl()!, cluster, name);
  else await onServer(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
}

export const dropTemplateDatabase = (t: Template) => dropDatabase(t.cluster, t.name);
