// The migrated template database of a test run on PostgreSQL (test/helpers/global-setup.ts) and the
// copies each test file's freshDatabase() makes of it; creating and dropping test databases on one
// server or on every node of a Citus cluster.
import { randomBytes } from "node:crypto";
import { openPostgres } from "../../server/db/client.js";
import { migrateDirect } from "../../server/db/migrate.js";
import { dropClusterDatabase, onNode, type Cluster } from "./cluster.js";

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

/** A migrated database to copy, made once per run (plain PostgreSQL: Citus supports no template but template1). */
export async function createTemplateDatabase(): Promise<Template> {
  const base = directBaseUrl()!;
  const name = `test_template_${randomBytes(5).toString("hex")}`;
  await onServer(`CREATE DATABASE ${name}`);
  const url = withDatabase(base, name);
  const db = await openPostgres(url, { max: 1 });
  try {
    await migrateDirect({ databaseUrl: url, directDatabaseUrl: url }, db);
  } finally {
    await db.close();
  }
  return { name, cluster: null };
}

/** A new database for one test file, copied from the template. */
export async function copyTemplate(template: Template): Promise<string> {
  const name = `test_${randomBytes(6).toString("hex")}`;
  await onServer(`CREATE DATABASE ${name} TEMPLATE ${template.name}`);
  return name;
}

/** Drops a test database (on every node of a cluster). */
export async function dropDatabase(cluster: Cluster | null, name: string): Promise<void> {
  if (cluster) await dropClusterDatabase(directBaseUrl()!, cluster, name);
  else await onServer(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
}

export const dropTemplateDatabase = (t: Template) => dropDatabase(t.cluster, t.name);
