// Module state that would carry over between the database files, which share their worker's process
// (vitest.config.ts isolate: false), is reset before each file (test/helpers/shared-process.ts; the
// list and its guard: test/helpers/module-state.ts, test/unit/legs.test.ts). Shown on the column types
// (server/db/insert.ts), read once per process: a database whose schema differs from the one they were
// read from — another file's, after a test altered a table — is served stale types until they are
// forgotten. The difference here: a table created after the read (and dropped again).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { forgetColumnTypes, loadColumnTypes, rowSql } from "../../server/db/insert.js";
import { freshDatabase, type TestDb } from "../helpers/app.js";

describe("the column types, read once per process", () => {
  let t: TestDb;
  beforeAll(async () => {
    t = await freshDatabase();
  });
  afterAll(async () => {
    forgetColumnTypes(); // nothing of this schema's change for the rest of the file
    await t?.db.sql.exec(`DROP TABLE IF EXISTS "ModuleStateProbe"`);
    await t?.drop();
  });

  it("are the first schema's until forgotten, as the setup file does before each database file", async () => {
    forgetColumnTypes();
    expect((await loadColumnTypes(t.db.prisma)).has("Lead")).toBe(true);
    await t.db.sql.exec(`CREATE TABLE "ModuleStateProbe" ("id" int)`);
    const probe = { table: "ModuleStateProbe", row: { id: 1 } };
    await expect(rowSql(t.db.prisma, probe)).rejects.toThrow('unknown table "ModuleStateProbe"');
    forgetColumnTypes();
    const { columns } = await rowSql(t.db.prisma, probe);
    expect(columns.sql).toBe(`("id")`);
  });
});
