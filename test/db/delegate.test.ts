// "tenant_exec" (server/db/delegate.ts; issue 26, function-call delegation): the one-statement
// creates run as the statements of one call, on every backend (PGlite, PostgreSQL, a pooler; on
// Citus delegated to the tenant's worker). Here: the statements' text over one text[] parameter, the
// driver's text form of each value, the previous statement's value as $2, a statement with no row
// ending the call with nothing written, SQLSTATEs kept (the creates fall back on 22/23/40), and on
// Citus that db:distribute made it a distributed function co-located with the tenant tables.
// @topology pooler citus
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Prisma } from "../../generated/prisma/client.js";
import { delegated, PREVIOUS, runForTenant, TENANT_EXEC, TENANT_EXEC_CALL, tenantDelegation, undelegated, useTenantDelegation } from "../../server/db/delegate.js";
import type { SqlRunner } from "../../server/db/client.js";
import { readRaw } from "../../server/db/insert.js";
import pg from "pg";
import { citusCluster, onSameDatabase } from "../helpers/cluster.js";
import { expectEnvelope, startApp } from "../helpers/app.js";
import { fixture, tenant } from "../helpers/fixtures.js";

let app: Awaited<ReturnType<typeof startApp>>;
let tenantId: string;
let key: string;
let ana: string;
let other: { tenantId: string; key: string };
const onCitus = Boolean(process.env.DATABASE_URL) && (await citusCluster(process.env.DIRECT_DATABASE_URL || process.env.DATABASE_URL!)) !== null;

beforeAll(async () => {
  // Its statements are watched on app.db: every request on the coordinator's pool, also with DATABASE_ROUTING=workers.
  app = await startApp({ config: { databaseRouting: "coordinator" } });
  const ids = await app.load(fixture(tenant("acme"), tenant("beta")));
  tenantId = ids.tenants.acme!.id;
  key = ids.tenants.acme!.apiKeys.full!.key;
  ana = ids.tenants.acme!.users.ana!;
  other = { tenantId: ids.tenants.beta!.id, key: ids.tenants.beta!.apiKeys.full!.key };
}, 120_000);
afterAll(() => app?.close());

const at = new Date("2027-01-02T03:04:05.678Z");

describe("tenant_exec", () => {
  it("the statements read their values as $1[n] (numbered across them), each in the driver's text form", () => {
    const [texts, params] = delegated([
      Prisma.sql`SELECT ${"a'b"}::text, ${at}::timestamptz, ${["x", null, 'q"uote']}::text[]`,
      Prisma.sql`SELECT ${{ k: [1] }}::jsonb, ${7}::int, ${true}::boolean, ${null}::uuid, ${PREVIOUS}->>'x'`,
    ]);
    expect(texts).toEqual([
      "SELECT ($1[1])::text, ($1[2])::timestamptz, ($1[3])::text[]",
      "SELECT ($1[4])::jsonb, ($1[5])::int, ($1[6])::boolean, ($1[7])::uuid, $2->>'x'",
    ]);
    expect(params[0]).toBe("a'b");
    expect(new Date(params[1]!).getTime()).toBe(at.getTime());
    expect(params[2]).toBe('{"x",NULL,"q\\"uote"}');
    expect(params.slice(3)).toEqual(['{"k":[1]}', "7", "true", null]);
    // The statement observer's view of a call: each statement in its own form, $2 after the values.
    expect(undelegated(TENANT_EXEC_CALL, [tenantId, texts, params])).toEqual([
      ["SELECT $1::text, $2::timestamptz, $3::text[]", [...params, "{}"]],
      ["SELECT $4::jsonb, $5::int, $6::boolean, $7::uuid, $8->>'x'", [...params, "{}"]],
    ]);
    expect(undelegated("SELECT 1", [])).toBeUndefined();
  });

  it("returns what the statement returns sent directly: every type", async () => {
    const q = Prisma.sql`SELECT to_jsonb(x) AS "result" FROM (SELECT ${"a'b\\c"}::text AS "s", ${at}::timestamptz AS "at", ${["x", null, 'q"uote', "{}"]}::text[] AS "tags",
                           ${{ k: [1, "é"] }}::jsonb AS "doc", ${7}::int AS "n", ${true}::boolean AS "b", ${null}::uuid AS "none", ${tenantId}::uuid AS "t") x`;
    const [direct] = await readRaw(app.db)<{ result: unknown }>(q);
    expect(await runForTenant(app.db, tenantId, [q])).toEqual(direct!.result);
    expect(direct!.result).toMatchObject({ s: "a'b\\c", tags: ["x", null, 'q"uote', "{}"], doc: { k: [1, "é"] }, n: 7, b: true, none: null, t: tenantId });
  });

  it("each statement reads the previous one's value as $2; a statement without a row ends the call: nothing after it runs", async () => {
    const name = `tx-${Date.now()}`;
    // RETURNING names no function (Citus allows only immutable ones there): the value read, $2.
    const insert = Prisma.sql`INSERT INTO "ContactList" ("tenantId", "id", "name") VALUES (${tenantId}::uuid, (${PREVIOUS}->>'id')::uuid, ${PREVIOUS}->>'name') RETURNING ${PREVIOUS}`;
    const id = crypto.randomUUID();
    const out = await runForTenant(app.db, tenantId, [Prisma.sql`SELECT jsonb_build_object('id', ${id}::uuid, 'name', ${name}::text)`, insert]);
    expect(out).toEqual({ id, name });
    expect(await app.db.prisma.contactList.findFirst({ where: { tenantId, id }, select: { name: true } })).toEqual({ name });
    const refused = await runForTenant(app.db, tenantId, [Prisma.sql`SELECT jsonb_build_object('id', ${crypto.randomUUID()}::uuid, 'name', ${`${name}-2`}::text) WHERE false`, insert]);
    expect(refused).toBeUndefined();
    expect(await app.db.prisma.contactList.count({ where: { tenantId, name: `${name}-2` } })).toBe(0);
  });

  it("a refusal keeps its SQLSTATE and rolls the whole call back", async () => {
    const name = `rb-${Date.now()}`;
    const err: any = await runForTenant(app.db, tenantId, [
      Prisma.sql`INSERT INTO "ContactList" ("tenantId", "name") VALUES (${tenantId}::uuid, ${name}::text) RETURNING ${PREVIOUS}`,
      Prisma.sql`SELECT to_jsonb(${"not a number"}::int)`,
    ]).catch((e) => e);
    expect(err.code).toBe("22P02");
    expect(await app.db.prisma.contactList.count({ where: { tenantId, name } })).toBe(0);
  });

  describe("the one-statement creates as a call (the form they take on Citus), on this backend", () => {
    // The statements of every "tenant_exec" call while these run.
    const calls: string[][] = [];
    let query: SqlRunner["query"];
    beforeAll(() => {
      useTenantDelegation(app.db, true);
      query = app.db.sql.query;
      app.db.sql.query = function (this: SqlRunner, text: string, params?: unknown[], opts?: unknown) {
        if (text === TENANT_EXEC_CALL) calls.push(params![1] as string[]);
        return query.call(this, text, params, opts as never);
      } as SqlRunner["query"];
    });
    afterAll(() => {
      app.db.sql.query = query;
      useTenantDelegation(app.db, undefined);
    });

    it("POST /leads: 201, the row and the stored response (resolved contact and stage); the replay returns it; a 404 writes nothing", async () => {
      const body = { customerName: "Delegated Lead", customerPhone: "+34 600 111 222", zones: ["north", "sea view"], budget: { min: 100000, max: 250000 }, notes: 'it\'s \\ "quoted"' };
      const r = await app.request("POST", "/public/v1/leads", { key, body, headers: { "Idempotency-Key": "delegated-lead-1" } });
      expect(r.status, r.text).toBe(201);
      expect(r.body).toMatchObject({ customerName: "Delegated Lead", zones: ["north", "sea view"], notes: body.notes, source: "api" });
      expect(r.body.stageId).toEqual(expect.any(String));
      const got = await app.request("GET", `/public/v1/leads/${r.body.id}`, { key });
      expect(got.body).toEqual(r.body);
      const again = await app.request("POST", "/public/v1/leads", { key, body, headers: { "Idempotency-Key": "delegated-lead-1" } });
      expect(again.status).toBe(201);
      expect(again.headers.get("idempotent-replayed")).toBe("true");
      expect(again.body).toEqual(r.body);
      expect(await app.db.prisma.lead.count({ where: { tenantId, customerName: "Delegated Lead" } })).toBe(1);
      // Both tries went through a call of three statements (values, claim, row): the replay's found the key taken.
      expect(calls.filter((c) => c.length === 3 && c[2]!.includes('INSERT INTO "Lead"') && c[1]!.includes('"IdempotencyRecord"'))).toHaveLength(2);
      const missing = await app.request("POST", "/public/v1/leads", { key, body: { customerName: "Nowhere", stageId: crypto.randomUUID() }, headers: { "Idempotency-Key": "delegated-lead-2" } });
      expectEnvelope(missing, 404, "NOT_FOUND");
      expect(await app.db.prisma.lead.count({ where: { tenantId, customerName: "Nowhere" } })).toBe(0);
      expect(await app.db.prisma.idempotencyRecord.count({ where: { tenantId, key: "delegated-lead-2" } })).toBe(0);
    });

    it("POST /appointments: 201 (calendar lock and checks in the call), then the overlap is a 409 with nothing written", async () => {
      const slot = { assignedUserId: ana, title: "Delegated visit", appointmentType: "visit", startsAt: "2027-05-03T09:00:00Z", endsAt: "2027-05-03T10:00:00Z" };
      const r = await app.request("POST", "/public/v1/appointments", { key, body: slot, headers: { "Idempotency-Key": "delegated-appt-1" } });
      expect(r.status, r.text).toBe(201);
      expect(r.body).toMatchObject({ title: "Delegated visit", startsAt: "2027-05-03T09:00:00.000Z", status: "scheduled" });
      expect(calls.some((c) => /pg_advisory_xact_lock/.test(c[0]!) && c.at(-1)!.includes('INSERT INTO "Appointment"'))).toBe(true);
      const clash = await app.request("POST", "/public/v1/appointments", { key, body: { ...slot, title: "Clash" } });
      expectEnvelope(clash, 409, "APPOINTMENT_OVERLAP");
      expect(await app.db.prisma.appointment.count({ where: { tenantId, title: "Clash" } })).toBe(0);
    });

    it("each tenant's call writes that tenant's rows only", async () => {
      const r = await app.request("POST", "/public/v1/leads", { key: other.key, body: { customerName: "Beta Lead" } });
      expect(r.status).toBe(201);
      expect(await app.db.prisma.lead.count({ where: { tenantId: other.tenantId, customerName: "Beta Lead" } })).toBe(1);
      expect(await app.db.prisma.lead.count({ where: { tenantId, customerName: "Beta Lead" } })).toBe(0);
    });
  });

  it("the service uses the call where tenant_exec is distributed (Citus), else one prepared statement", async () => {
    useTenantDelegation(app.db, undefined);
    expect(await tenantDelegation(app.db)).toBe(onCitus);
  });

  it.runIf(onCitus)("on Citus: distributed by db:distribute by its tenant argument, co-located with the tenant tables", async () => {
    const [fn] = await app.db.sql.query<{ arg: number; colocated: boolean }>(
      `SELECT o.distribution_argument_index AS arg,
              o.colocationid = (SELECT colocationid FROM pg_dist_partition WHERE logicalrelid = '"Lead"'::regclass) AS colocated
         FROM pg_dist_object o WHERE o.classid = 'pg_proc'::regclass AND o.objid = to_regprocedure($1)`,
      [TENANT_EXEC],
    );
    expect(fn).toEqual({ arg: 0, colocated: true });
  });
});

// On a Citus node holding the tenant's shards, the call's statements name the shards themselves
// (migration 20261129000000_tenant_exec_local): PostgreSQL plans them as on one server.
describe("tenant_exec over the tenant's local shards", () => {
  const rename = async (text: string, names: Record<string, string>) =>
    (await app.db.sql.query<{ out: string }>(`SELECT "tenant_exec_rename"($1, $2::jsonb) AS "out"`, [text, JSON.stringify(names)]))[0]!.out;

  it("tenant_exec_rename: every quoted table name of the map, and nothing else", async () => {
    const names = { Lead: "Lead_102040", User: "User_102011" };
    expect(await rename(`SELECT l."id" FROM "Lead" l JOIN "User" u ON u."id" = l."userId" WHERE EXISTS (SELECT 1 FROM "Lead" x) AND l."status" = ($1[1])::"LeadStatus"`, names)).toBe(
      `SELECT l."id" FROM "Lead_102040" l JOIN "User_102011" u ON u."id" = l."userId" WHERE EXISTS (SELECT 1 FROM "Lead_102040" x) AND l."status" = ($1[1])::"LeadStatus"`,
    );
    // Not a table of the map, a longer name, lower-case identifiers (aliases, columns), unquoted words: unchanged.
    const other = `WITH "resolved" AS (SELECT 1) SELECT "Leads", "LeadX", Lead, "lead", "Contact" FROM "resolved"`;
    expect(await rename(other, names)).toBe(other);
  });

  it(`"tenant_exec_local": nothing where the tenant's shards are not on this node (${onCitus ? "the coordinator holds none" : "not a Citus node"}); so no names for the triggers after a call`, async () => {
    const [row] = await app.db.sql.query<{ names: unknown }>(`SELECT "tenant_exec_local"($1::uuid) AS "names"`, [tenantId]);
    expect(row!.names).toBeNull();
    const [after] = await app.db.sql.query<{ names: unknown }>(
      `WITH c AS MATERIALIZED (SELECT "tenant_exec"($1::uuid, ARRAY['SELECT ''{}''::jsonb'], '{}')) SELECT "tenant_exec_names"($1::uuid) AS "names" FROM c`,
      [tenantId],
    );
    expect(after!.names).toBeNull();
  });

  // Migration 20261201000000_local_prepared: the statements over the local shards as prepared
  // statements of the session, the session's list of them kept in a setting (here on any PostgreSQL).
  it.runIf(Boolean(process.env.DATABASE_URL))("local_call: one prepared statement per text and types, bounded per session; the list survives rollbacks (found again, or prepared again on invalid_sql_statement_name)", async () => {
    const c = new pg.Client({ connectionString: app.testDb.directUrl });
    await c.connect();
    try {
      const call = async (sql: string, check = false) => (await c.query<{ q: string }>(`SELECT "local_call"($1, 'integer', '41', $2) AS q`, [sql, check])).rows[0]!.q;
      const run = async (sql: string, check = false) => (await c.query(await call(sql, check))).rows[0];
      const ours = async () =>
        (await c.query<{ name: string; statement: string }>(`SELECT name, statement FROM pg_prepared_statements WHERE name LIKE 'crm\\_local\\_%' ORDER BY prepare_time, name`)).rows;
      const listed = async () => (await c.query<{ v: string }>(`SELECT current_setting('crm.local_prepared', true) AS v`)).rows[0]!.v?.split(" ").sort() ?? [];
      const limit = (await c.query<{ n: number }>(`SELECT "local_call_limit"() AS n`)).rows[0]!.n;
      expect(await run("SELECT $1 + 1 AS n")).toEqual({ n: 42 });
      expect(await run("SELECT $1 + 1 AS n")).toEqual({ n: 42 });
      expect(await call("SELECT $1 + 1 AS n")).toMatch(/^EXECUTE crm_local_[0-9a-f]{32}\(41\)$/);
      expect(await ours()).toHaveLength(1);
      expect(await listed()).toEqual((await ours()).map((r) => r.name));
      // Prepared in a transaction that rolls back: the statement stays, the list reverts; the next
      // call finds it in the session's statements (no second PREPARE, which would fail).
      await c.query("BEGIN");
      expect(await run("SELECT $1 + 2 AS n")).toEqual({ n: 43 });
      await c.query("ROLLBACK");
      expect(await ours()).toHaveLength(2);
      expect(await listed()).toHaveLength(1);
      expect(await run("SELECT $1 + 2 AS n")).toEqual({ n: 43 });
      expect(await listed()).toEqual((await ours()).map((r) => r.name).sort());
      // Bounded: past the limit the statement prepared longest ago goes.
      for (let i = 0; i < limit + 5; i++) expect(await run(`SELECT $1 + ${100 + i} AS n`)).toEqual({ n: 141 + i });
      const kept = await ours();
      expect(kept).toHaveLength(limit);
      expect(kept.some((r) => r.statement.endsWith("AS SELECT $1 + 1 AS n"))).toBe(false);
      expect(kept.at(-1)!.statement).toMatch(new RegExp(`AS SELECT \\$1 \\+ ${100 + limit + 4} AS n$`));
      expect(await listed()).toEqual(kept.map((r) => r.name).sort());
      // Deallocated (the eviction of the oldest) in a transaction that rolls back: the list names it
      // again, its EXECUTE fails with invalid_sql_statement_name before running anything, and a call
      // with p_check prepares it again.
      const oldest = kept[0]!.statement.replace(/^PREPARE \S+ AS /, "");
      await c.query("BEGIN");
      await run("SELECT $1 + 1000 AS n");
      await c.query("ROLLBACK");
      expect(await listed()).toContain(kept[0]!.name);
      expect((await ours()).map((r) => r.name)).not.toContain(kept[0]!.name);
      await expect(run(oldest)).rejects.toMatchObject({ code: "26000" });
      expect(await run(oldest, true)).toEqual({ n: 41 + Number(/\+ (\d+)/.exec(oldest)![1]) });
      expect(await ours()).toHaveLength(limit);
      expect(await listed()).toEqual((await ours()).map((r) => r.name).sort());
    } finally {
      await c.end();
    }
  });

  describe.runIf(onCitus)("on Citus", () => {
    const nodes: Record<"holder" | "other", pg.Client> = {} as never;
    let anchor: string;
    beforeAll(async () => {
      const admin = new pg.Client({ connectionString: app.testDb.directUrl });
      await admin.connect();
      try {
        const rows = (
          await admin.query<{ host: string; port: number; holds: boolean; anchor: string }>(
            `SELECT n.nodename AS host, n.nodeport AS port,
                    EXISTS (SELECT 1 FROM pg_dist_placement p WHERE p.groupid = n.groupid AND p.shardid = get_shard_id_for_distribution_column('"Lead"', $1::uuid)) AS holds,
                    get_shard_id_for_distribution_column('"Lead"', $1::uuid)::text AS anchor
               FROM pg_dist_node n WHERE n.groupid <> 0 AND n.noderole = 'primary' ORDER BY n.nodeid`,
            [tenantId],
          )
        ).rows;
        for (const [role, node] of [["holder", rows.find((r) => r.holds)], ["other", rows.find((r) => !r.holds)]] as const) {
          nodes[role] = new pg.Client({ connectionString: onSameDatabase(app.testDb.directUrl!, node!) });
          await nodes[role].connect();
        }
        anchor = rows[0]!.anchor;
      } finally {
        await admin.end();
      }
    });
    afterAll(async () => {
      await Promise.all(Object.values(nodes).map((c) => c.end()));
    });

    /** A call's result on `node`, and the notices Citus gave for each statement it ran on a local shard itself. */
    async function callOn(node: pg.Client, statement: string, params: (string | null)[] = [tenantId]): Promise<{ result: unknown; routed: string[] }> {
      const routed: string[] = [];
      const listen = (n: { message?: string }) => void (n.message?.startsWith("executing the command locally") && routed.push(n.message));
      node.on("notice", listen);
      try {
        await node.query("SET citus.log_local_commands = on; SET client_min_messages = notice");
        const { rows } = await node.query<{ result: unknown }>(`SELECT "tenant_exec"($1::uuid, ARRAY[$2::text], $3::text[]) AS "result"`, [tenantId, statement, params]);
        return { result: rows[0]!.result, routed };
      } finally {
        await node.query("RESET citus.log_local_commands; RESET client_min_messages");
        node.off("notice", listen);
      }
    }
    const count = `SELECT jsonb_build_object('n', count(*)) AS "result" FROM "Lead" l JOIN "Tenant" t ON t."id" = l."tenantId" WHERE l."tenantId" = ($1[1])::uuid`;

    it("on the worker holding the tenant: the names of its shards and of the reference tables' placements there", async () => {
      const { rows } = await nodes.holder.query<{ names: Record<string, string> }>(`SELECT "tenant_exec_local"($1::uuid) AS "names"`, [tenantId]);
      const names = rows[0]!.names;
      const expected = (
        await nodes.holder.query<{ name: string; shard: string }>(
          `SELECT c.relname AS name, c.relname || '_' || s.shardid AS shard
             FROM pg_dist_partition p JOIN pg_class c ON c.oid = p.logicalrelid JOIN pg_dist_shard s ON s.logicalrelid = p.logicalrelid
            WHERE p.partmethod = 'n' OR s.shardid = get_shard_id_for_distribution_column(p.logicalrelid, $1::uuid)`,
          [tenantId],
        )
      ).rows;
      expect(expected.length).toBeGreaterThan(20);
      expect(names).toEqual(Object.fromEntries(expected.map((r) => [r.name, r.shard])));
      // Each a table of this node.
      const { rows: missing } = await nodes.holder.query(`SELECT n FROM jsonb_each_text($1::jsonb) e(k, n) WHERE to_regclass(format('%I', n)) IS NULL`, [JSON.stringify(names)]);
      expect(missing).toEqual([]);
    });

    it("a call there plans its statements on those shards (Citus routes none of them), and answers as through the coordinator", async () => {
      const there = await callOn(nodes.holder, count);
      const elsewhere = await callOn(nodes.other, count);
      const [viaCoordinator] = await readRaw(app.db)<{ n: number }>(
        Prisma.sql`SELECT count(*)::int AS n FROM "Lead" l JOIN "Tenant" t ON t."id" = l."tenantId" WHERE l."tenantId" = ${tenantId}::uuid`,
      );
      expect(there.result).toEqual({ n: viaCoordinator!.n });
      expect(elsewhere.result).toEqual({ n: viaCoordinator!.n });
      expect(there.routed).toEqual([]);
      // On a node without the tenant's shards the statement is Citus's to route, as it was written.
      const { rows } = await nodes.other.query<{ names: unknown }>(`SELECT "tenant_exec_local"($1::uuid) AS "names"`, [tenantId]);
      expect(rows[0]!.names).toBeNull();
    });

    // Migration 20261130000000_tenant_exec_triggers: the triggers' writes of such a call (changes
    // capture, list counters) over the same shards, as dynamic SQL; elsewhere their static statements.
    it("the triggers of a call there write over those shards too (no statement routed by Citus), the same rows as a call Citus routes", async () => {
      const [stage] = await readRaw(app.db)<{ id: string }>(Prisma.sql`SELECT "id" FROM "PipelineStage" WHERE "tenantId" = ${tenantId}::uuid LIMIT 1`);
      const insert = `INSERT INTO "Lead" ("tenantId", "id", "customerName", "stageId", "createdAt") VALUES (($1[1])::uuid, ($1[2])::uuid, $1[3], ($1[4])::uuid, ($1[5])::timestamptz) RETURNING $2`;
      const counted = async () =>
        Object.fromEntries(
          (
            await readRaw(app.db)<{ dim: string; value: string; n: number }>(
              Prisma.sql`SELECT "dim", "value", sum("n")::int AS n FROM "ListCounter" WHERE "tenantId" = ${tenantId}::uuid AND "entity" = 'Lead' GROUP BY 1, 2`,
            )
          ).map((r) => [`${r.dim}:${r.value}`, r.n]),
        );
      const before = await counted();
      const ids = [crypto.randomUUID(), crypto.randomUUID(), crypto.randomUUID()];
      const day = "2031-07-08T09:10:11.000Z";
      // The day's keys are new: the first lead makes their counter rows ("ListCounter_add", the keys'
      // slow path, left to Citus); the next one finds them, and nothing of its call is Citus's to route.
      const first = await callOn(nodes.holder, insert, [tenantId, ids[0]!, "Over the shards", stage!.id, day]);
      const there = await callOn(nodes.holder, insert, [tenantId, ids[1]!, "Over the shards", stage!.id, day]);
      const elsewhere = await callOn(nodes.other, insert, [tenantId, ids[2]!, "Routed by Citus", stage!.id, day]);
      expect(first.result).toEqual({});
      expect(there).toEqual({ result: {}, routed: [] });
      expect(elsewhere.result).toEqual({});
      // Each lead's change recorded, and each counter key moved by one per lead.
      const changes = await readRaw(app.db)<{ objectId: string; action: string }>(
        Prisma.sql`SELECT "objectId"::text AS "objectId", "action" FROM "ChangeLog" WHERE "tenantId" = ${tenantId}::uuid AND "type" = 'lead' AND "objectId" = ANY(${ids}::uuid[]) ORDER BY 1`,
      );
      expect(changes).toEqual([...ids].sort().map((objectId) => ({ objectId, action: "upsert" })));
      const after = await counted();
      const moved = Object.fromEntries(Object.entries(after).filter(([k, n]) => n !== (before[k] ?? 0)).map(([k, n]) => [k, n - (before[k] ?? 0)]));
      expect(moved).toEqual({ "all:": 3, "y:2031": 3, "m:2031-07": 3, "d:2031-07-08": 3 });
      const [{ n }] = (await readRaw(app.db)<{ n: number }>(Prisma.sql`SELECT count(*)::int AS n FROM "Lead" WHERE "tenantId" = ${tenantId}::uuid`)) as [{ n: number }];
      expect(after["all:"]).toBe(n);
    });

    it("the names are the call's transaction's and its tenant's only", async () => {
      const names = `SELECT "tenant_exec_names"($1::uuid) AS "t", "tenant_exec_names"($2::uuid) AS "other"`;
      await nodes.holder.query("BEGIN");
      try {
        expect((await nodes.holder.query(names, [tenantId, other.tenantId])).rows[0]).toEqual({ t: null, other: null });
        await nodes.holder.query(`SELECT "tenant_exec"($1::uuid, ARRAY[$2::text], ARRAY[$3::text])`, [tenantId, count, tenantId]);
        const { rows } = await nodes.holder.query(names, [tenantId, other.tenantId]);
        expect(rows[0].t).toEqual((await nodes.holder.query(`SELECT "tenant_exec_local"($1::uuid) AS n`, [tenantId])).rows[0].n);
        expect(rows[0].other).toBeNull();
      } finally {
        await nodes.holder.query("COMMIT");
      }
      expect((await nodes.holder.query(names, [tenantId, other.tenantId])).rows[0]).toEqual({ t: null, other: null });
    });

    // Migration 20261201000000_local_prepared: over the local shards, each statement (the call's and
    // the two trigger statements) a prepared statement of the session.
    it("there each statement runs as a prepared statement of the session: planned once for the session, the same rows; one whose statement is gone is prepared again", async () => {
      const [stage] = await readRaw(app.db)<{ id: string }>(Prisma.sql`SELECT "id" FROM "PipelineStage" WHERE "tenantId" = ${tenantId}::uuid LIMIT 1`);
      const insert = `INSERT INTO "Lead" ("tenantId", "id", "customerName", "stageId", "createdAt") VALUES (($1[1])::uuid, ($1[2])::uuid, $1[3], ($1[4])::uuid, ($1[5])::timestamptz) RETURNING $2`;
      const session = await nodes.holder.query("DEALLOCATE ALL; RESET crm.local_prepared").then(() => nodes.holder);
      const ours = async () =>
        (await session.query<{ statement: string }>(`SELECT statement FROM pg_prepared_statements WHERE name LIKE 'crm\\_local\\_%' ORDER BY statement`)).rows.map((r) => r.statement);
      const day = "2031-08-09T10:11:12.000Z";
      const ids = Array.from({ length: 4 }, () => crypto.randomUUID());
      const before = await readRaw(app.db)<{ n: number }>(
        Prisma.sql`SELECT coalesce(sum("n"), 0)::int AS n FROM "ListCounter" WHERE "tenantId" = ${tenantId}::uuid AND "entity" = 'Lead' AND "dim" = 'all'`,
      );
      // The first call makes the day's counter rows (the slow path, static); the second prepares the
      // statements over the shards: the call's INSERT, the changes capture's, the counters' batch.
      for (const id of ids.slice(0, 2)) expect((await callOn(session, insert, [tenantId, id, "Prepared", stage!.id, day])).result).toEqual({});
      const prepared = await ours();
      expect(prepared).toHaveLength(3);
      expect(prepared.find((q) => q.includes(`INSERT INTO "Lead_`))).toContain(`AS INSERT INTO "Lead_`);
      expect(prepared.some((q) => q.includes(`INSERT INTO "ChangeLog_`))).toBe(true);
      expect(prepared.some((q) => q.includes(`UPDATE "ListCounter_`))).toBe(true);
      // The session's list names exactly those.
      const list = (await session.query<{ v: string }>(`SELECT current_setting('crm.local_prepared') AS v`)).rows[0]!.v.split(" ").sort();
      expect(list).toEqual((await session.query<{ name: string }>(`SELECT name FROM pg_prepared_statements WHERE name LIKE 'crm\\_local\\_%' ORDER BY name`)).rows.map((r) => r.name));
      // The next call prepares nothing more, and nothing of it is Citus's to route.
      expect(await callOn(session, insert, [tenantId, ids[2]!, "Prepared", stage!.id, day])).toEqual({ result: {}, routed: [] });
      expect(await ours()).toEqual(prepared);
      // Gone from under the list (DEALLOCATE ALL, not the list's setting): each call site catches
      // invalid_sql_statement_name, prepares its statement again and runs it once.
      await session.query("DEALLOCATE ALL");
      expect(await callOn(session, insert, [tenantId, ids[3]!, "Prepared", stage!.id, day])).toEqual({ result: {}, routed: [] });
      expect(await ours()).toEqual(prepared);
      // Every lead, its change and its counts: once each.
      const rowsOf = await readRaw(app.db)<{ leads: number; changes: number; all: number }>(
        Prisma.sql`SELECT (SELECT count(*)::int FROM "Lead" WHERE "tenantId" = ${tenantId}::uuid AND "id" = ANY(${ids}::uuid[])) AS leads,
                          (SELECT count(*)::int FROM "ChangeLog" WHERE "tenantId" = ${tenantId}::uuid AND "type" = 'lead' AND "objectId" = ANY(${ids}::uuid[])) AS changes,
                          (SELECT coalesce(sum("n"), 0)::int FROM "ListCounter" WHERE "tenantId" = ${tenantId}::uuid AND "entity" = 'Lead' AND "dim" = 'd' AND "value" = '2031-08-09') AS "all"`,
      );
      expect(rowsOf).toEqual([{ leads: 4, changes: 4, all: 4 }]);
      const after = await readRaw(app.db)<{ n: number }>(
        Prisma.sql`SELECT coalesce(sum("n"), 0)::int AS n FROM "ListCounter" WHERE "tenantId" = ${tenantId}::uuid AND "entity" = 'Lead' AND "dim" = 'all'`,
      );
      expect(after[0]!.n - before[0]!.n).toBe(4);
    });

    it("holds Citus's share lock on the shard group's metadata until the call's transaction ends (a shard move or split waits for it)", async () => {
      const held = async () =>
        (
          await nodes.holder.query<{ n: number }>(
            // Citus's lock on a co-located shard group's metadata (LockShardDistributionMetadata): an
            // advisory lock of class 8 on (the shard's index among its table's shards, the colocation id).
            `SELECT count(*)::int AS n FROM pg_locks l, pg_dist_shard a JOIN pg_dist_partition p ON p.logicalrelid = a.logicalrelid
              WHERE a.shardid = $1::bigint AND l.pid = pg_backend_pid() AND l.locktype = 'advisory' AND l.objsubid = 8 AND l.mode = 'ShareLock'
                AND l.objid = p.colocationid
                AND l.classid = (SELECT count(*) FROM pg_dist_shard s WHERE s.logicalrelid = a.logicalrelid AND s.shardminvalue::int < a.shardminvalue::int)`,
            [anchor],
          )
        ).rows[0]!.n;
      await nodes.holder.query("BEGIN");
      try {
        expect(await held()).toBe(0);
        await nodes.holder.query(`SELECT "tenant_exec"($1::uuid, ARRAY[$2::text], ARRAY[$3::text])`, [tenantId, count, tenantId]);
        expect(await held()).toBe(1);
      } finally {
        await nodes.holder.query("ROLLBACK");
      }
      expect(await held()).toBe(0);
    });
  });
});
