// The pool of distributed test databases on a Citus cluster (test/helpers/citus-pool.ts): a database
// that a file used comes back emptied (the rows the migrations wrote kept) with the fingerprint it was
// made with, and one that is no longer what a new one would be — here a table made on one worker
// only, which the coordinator's catalog does not show — is dropped instead, on every node. A pool of
// its own (a run name of this file), so that no other file takes its database meanwhile.
import { randomBytes } from "node:crypto";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { openPostgres } from "../../server/db/client.js";
import { distribute } from "../../server/db/distribute.js";
import { migrateDirect } from "../../server/db/migrate.js";
import { directBaseUrl, withDatabase } from "../helpers/app.js";
import { claim, fingerprint, forget, pristineOf, register, release } from "../helpers/citus-pool.js";
import { citusCluster, createClusterDatabase, nodeUrl, onNode, TEST_SHARD_COUNT } from "../helpers/cluster.js";
import { dropDatabase } from "../helpers/template.js";

const base = process.env.DATABASE_URL ? directBaseUrl()! : undefined;
const cluster = base ? await citusCluster(base) : null;

const count = async (url: string, sql: string) => {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return Number((await c.query<{ n: string }>(sql)).rows[0]!.n);
  } finally {
    await c.end();
  }
};

describe.skipIf(!cluster)("the pool of distributed test databases", () => {
  it("a used database comes back emptied and pristine; one changed on a worker is dropped on every node", {
    timeout: 180_000,
  }, async () => {
    const run = `test_${randomBytes(5).toString("hex")}`;
    const name = `test_pool_${randomBytes(5).toString("hex")}`;
    await register(base!, cluster!, run, name);
    try {
      await used(run, name);
    } finally {
      for (const left of await forget(base!, cluster!, run)) await dropDatabase(cluster!, left); // after a failure
    }
  });
});

/** The scenario of the test above on `name`, a database of the pool `run`. */
async function used(run: string, name: string) {
  await createClusterDatabase(base!, cluster!, name);
  const url = withDatabase(base!, name);
  const db = await openPostgres(url, { max: 1 });
  try {
    await migrateDirect({ databaseUrl: url, directDatabaseUrl: url }, db);
    await distribute(db.sql, { shardCount: TEST_SHARD_COUNT });
  } finally {
    await db.close();
  }
  const pristine = await pristineOf(url);
  expect(pristine.kept).toEqual(expect.arrayContaining(["PlanLimit", "_app_migrations"]));
  expect(pristine.truncate).toEqual(expect.arrayContaining(["Tenant", "Lead", "ChangeLog", "ListCounter"]));
  const drop = () => dropDatabase(cluster!, name);

  // Used: a tenant with a lead (its counters and its change recorded by the triggers, on a worker).
  const tenant = "5f0c0000-0000-4000-8000-0000000000b1";
  await onNode(url, [
    `INSERT INTO "Tenant" ("id", "name", "plan", "updatedAt") VALUES ('${tenant}', 'p', 'pro', now())`,
    `INSERT INTO "PipelineStage" ("tenantId", "id", "name", "position", "defaultEntry") VALUES ('${tenant}', ` +
      `'${tenant}', 'New', 1, true)`,
    `INSERT INTO "Lead" ("tenantId", "id", "customerName", "customerPhone", "stageId", "updatedAt") VALUES ('${tenant}', gen_random_uuid(), 'L', '+34600000001', '${tenant}', now())`,
  ]);
  expect(await count(url, `SELECT count(*) AS n FROM "ChangeLog"`)).toBeGreaterThan(0);
  expect(await release(base!, cluster!, run, name, url, pristine, drop)).toBe(true);

  const again = await claim(base!, cluster!, run);
  expect(again?.name).toBe(name);
  expect(again?.pristine).toEqual(pristine);
  for (const table of ["Tenant", "Lead", "ChangeLog", "ListCounter"])
    expect(await count(url, `SELECT count(*) AS n FROM "${table}"`), table).toBe(0);
  expect(await count(url, `SELECT count(*) AS n FROM "PlanLimit"`)).toBeGreaterThan(0);
  expect(await fingerprint(url, pristine.kept)).toBe(pristine.fingerprint);

  // Changed where only a worker's catalog shows it: dropped, on every node, and gone from the pool.
  await onNode(nodeUrl(base!, cluster!.workers[0]!, name), `CREATE TABLE "stray" (x int)`);
  expect(await release(base!, cluster!, run, name, url, pristine, drop)).toBe(false);
  for (const node of [cluster!.coordinator, ...cluster!.workers])
    expect(
      await count(nodeUrl(base!, node, "postgres"), `SELECT count(*) AS n FROM pg_database WHERE datname = '${name}'`),
      `${node.port}`,
    ).toBe(0);
  expect(await claim(base!, cluster!, run)).toBeUndefined();
  expect(await forget(base!, cluster!, run)).toEqual([]);
}
