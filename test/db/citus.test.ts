// Citus-ready schema: the migrated catalog holds only keys, indexes, constraints and foreign
// keys that a Citus cluster sharded by "tenantId" accepts, and every table has its role. Generic: a table
// added by a later migration is checked the same way (and fails until it has a role).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SqlRunner } from "../../server/db/client.js";
import { parseRole, readCatalog, schemaViolations, type Catalog } from "../helpers/citus.js";
import { freshDatabase, type TestDb } from "../helpers/app.js";

let t: TestDb;
let cat: Catalog;
beforeAll(async () => {
  t = await freshDatabase();
  cat = await readCatalog(t.db.sql);
});
afterAll(() => t.drop());

const roleOf = (name: string) => cat.tables.get(name)?.role;

describe("Citus-ready schema", () => {
  it("the migrated catalog has no violation", () => {
    expect(cat.tables.size).toBeGreaterThan(15);
    expect(schemaViolations(cat)).toEqual([]);
  });

  it("roles: shared tables are reference tables, tenant data is distributed by tenantId", () => {
    for (const name of ["PlanLimit", "Tenant", "User", "ApiKey"])
      expect(roleOf(name), name).toEqual({ kind: "reference" });
    for (const name of [
      "Lead",
      "Contact",
      "Conversation",
      "Message",
      "Appointment",
      "Ticket",
      "TicketComment",
      "IdempotencyRecord",
      "ContactListMember",
    ])
      expect(roleOf(name), name).toEqual({ kind: "distributed", column: "tenantId" });
    expect(roleOf("_app_migrations")).toEqual({ kind: "local" });
    // Every table with tenant data that is not one of the four reference tables is distributed.
    const tenantOwned = [...cat.tables.values()].filter((x) =>
      [...x.columns.values()].some((c) => c.name === "tenantId"),
    );
    for (const x of tenantOwned)
      if (!["User", "ApiKey"].includes(x.name))
        expect(x.role, x.name).toEqual({ kind: "distributed", column: "tenantId" });
  });

  it("primary keys are (tenantId, id); the idempotency claim is unique per tenant", () => {
    const pk = (table: string) => {
      const x = cat.tables.get(table)!;
      const c = cat.constraints.find((k) => k.table === table && k.type === "p")!;
      return c.keys.map((n) => x.columns.get(n)!.name);
    };
    for (const table of ["Lead", "User", "ApiKey", "WorkingHours", "Message", "IdempotencyRecord"])
      expect(pk(table), table).toEqual(["tenantId", "id"]);
    expect(pk("ContactListMember")).toEqual(["tenantId", "listId", "contactId"]);
    expect(cat.indexes.some((i) => i.name === "IdempotencyRecord_tenantId_apiKeyId_endpoint_key_key" && i.unique)).toBe(
      true,
    );
  });

  it("role comments parse strictly", () => {
    expect(parseRole("citus:distributed(tenantId)")).toEqual({ kind: "distributed", column: "tenantId" });
    expect(parseRole("citus:reference")).toEqual({ kind: "reference" });
    for (const bad of [null, "", "reference", "citus:distributed", "citus:distributed()", "citus:sharded(tenantId)"])
      expect(parseRole(bad)).toBeNull();
  });

  // The checker itself: tables that break each rule, created in a transaction that is rolled back.
  it("catches every kind of violation (unmarked table, keys, exclusion, foreign keys and their actions)", async () => {
    const found = await withScratch(async (s) => {
      // On a Citus coordinator the tables stay plain local tables of this transaction (Citus would turn
      // a table with a foreign key to a reference table into a Citus table, and refuse the others);
      // elsewhere the setting is an inert placeholder.
      await s.exec(`SET LOCAL citus.enable_ddl_propagation = off`);
      await s.exec(`
        CREATE TABLE "zz_unmarked" ("n" INTEGER);
        CREATE TABLE "zz_dist" ("tenantId" UUID, "id" UUID NOT NULL, "code" TEXT, "n" INTEGER,
          CONSTRAINT "zz_dist_pkey" PRIMARY KEY ("id"),
          CONSTRAINT "zz_dist_code_key" UNIQUE ("code"),
          CONSTRAINT "zz_dist_n_excl" EXCLUDE USING gist ("n" WITH =));
        CREATE UNIQUE INDEX "zz_dist_lower_code" ON "zz_dist" (lower("code"));
        ALTER TABLE "zz_dist" ADD CONSTRAINT "zz_dist_tenant_fkey" FOREIGN KEY ("tenantId") REFERENCES "Tenant"("id")
          ON UPDATE CASCADE ON DELETE SET NULL;
        CREATE TABLE "zz_child" ("tenantId" UUID NOT NULL, "id" UUID NOT NULL, "code" TEXT,
          CONSTRAINT "zz_child_pkey" PRIMARY KEY ("tenantId", "id"),
          CONSTRAINT "zz_child_code_fkey" FOREIGN KEY ("code") REFERENCES "zz_dist"("code"));
        CREATE TABLE "zz_ref" ("tenantId" UUID NOT NULL, "id" UUID NOT NULL, "leadId" UUID NOT NULL,
          CONSTRAINT "zz_ref_pkey" PRIMARY KEY ("tenantId", "id"),
          CONSTRAINT "zz_ref_lead_fkey" FOREIGN KEY ("tenantId", "leadId") REFERENCES "Lead"("tenantId", "id"));
        CREATE TABLE "zz_other" ("shard" INTEGER NOT NULL PRIMARY KEY);
        COMMENT ON TABLE "zz_dist" IS 'citus:distributed(tenantId)';
        COMMENT ON TABLE "zz_child" IS 'citus:distributed(tenantId)';
        COMMENT ON TABLE "zz_ref" IS 'citus:reference';
        COMMENT ON TABLE "zz_other" IS 'citus:distributed(shard)';`);
      return schemaViolations(await readCatalog(s));
    });
    const expected = [
      `zz_unmarked: no Citus role`,
      `zz_dist: distribution column "tenantId" is nullable`,
      `zz_dist: primary key (id) does not lead with "tenantId"`,
      `zz_dist: unique index "zz_dist_pkey" (id) lacks "tenantId"`,
      `zz_dist: unique index "zz_dist_code_key" (code) lacks "tenantId"`,
      `zz_dist: unique index "zz_dist_lower_code" (<expression>) lacks "tenantId"`,
      `zz_dist: exclusion constraint "zz_dist_n_excl" does not include "tenantId" WITH =`,
      `zz_dist: foreign key "zz_dist_tenant_fkey" → Tenant: ON UPDATE CASCADE on the distribution column`,
      `zz_dist: foreign key "zz_dist_tenant_fkey" → Tenant: ON DELETE SET NULL on the distribution column`,
      `zz_child: foreign key "zz_child_code_fkey" → zz_dist: does not pair "tenantId" with "tenantId" (both ` +
        `distributed)`,
      `zz_child: foreign key "zz_child_code_fkey" → zz_dist: does not pair "tenantId" with "tenantId" (a row could`,
      `zz_ref: foreign key "zz_ref_lead_fkey" → Lead: a reference table cannot reference a distributed table`,
      `zz_other: distributed by "shard", not "tenantId"`,
      `distribution columns have different types`,
    ];
    for (const e of expected)
      expect(
        found.some((v) => v.startsWith(e)),
        `${e}\nin:\n${found.join("\n")}`,
      ).toBe(true);
    // Nothing of the scratch tables survived the rollback.
    expect((await readCatalog(t.db.sql)).tables.has("zz_dist")).toBe(false);
  });
});

/** Runs fn on one session inside a transaction that is always rolled back. */
async function withScratch<T>(fn: (s: SqlRunner) => Promise<T>): Promise<T> {
  return t.db.sql.session(async (s) => {
    await s.exec("BEGIN");
    try {
      return await fn(s);
    } finally {
      await s.exec("ROLLBACK");
    }
  });
}
