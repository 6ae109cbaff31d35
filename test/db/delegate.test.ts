// "tenant_exec" (server/db/delegate.ts; Citus's function-call delegation): the one-statement
// creates run as the statements of one call, on every backend (PGlite, PostgreSQL, a pooler; on
// Citus delegated to the tenant's worker). Here: the statements' text over one text[] parameter, the
// driver's text form of each value, the previous statement's value as $2, a statement with no row
// ending the call with nothing written, SQLSTATEs kept (the creates fall back on 22/23/40), and on
// Citus that db:distribute made it a distributed function co-located with the tenant tables.
// @topology pooler citus
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Prisma } from "../../generated/prisma/client.js";
import {
  delegated,
  PREVIOUS,
  runForTenant,
  TENANT_EXEC,
  TENANT_EXEC_CALL,
  tenantDelegation,
  undelegated,
  useTenantDelegation,
} from "../../server/db/delegate.js";
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
const onCitus =
  Boolean(process.env.DATABASE_URL) &&
  (await citusCluster(process.env.DIRECT_DATABASE_URL || process.env.DATABASE_URL!)) !== null;

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
    const q = Prisma.sql`SELECT to_jsonb(x) AS "result"
                         FROM (SELECT ${"a'b\\c"}::text AS "s", ${at}::timestamptz AS "at",
                           ${["x", null, 'q"uote', "{}"]}::text[] AS "tags",
                           ${{ k: [1, "é"] }}::jsonb AS "doc", ${7}::int AS "n", ${true}::boolean AS "b",
                             ${null}::uuid AS "none", ${tenantId}::uuid AS "t") x`;
    const [direct] = await readRaw(app.db)<{ result: unknown }>(q);
    expect(await runForTenant(app.db, tenantId, [q])).toEqual(direct!.result);
    expect(direct!.result).toMatchObject({
      s: "a'b\\c",
      tags: ["x", null, 'q"uote', "{}"],
      doc: { k: [1, "é"] },
      n: 7,
      b: true,
      none: null,
      t: tenantId,
    });
  });

  it("each statement reads the previous one's value as $2; a statement without a row ends the call: nothing after it runs", async () => {
    const name = `tx-${Date.now()}`;
    // RETURNING names no function (Citus allows only immutable ones there): the value read, $2.
    const insert = Prisma.sql`INSERT INTO "ContactList" ("tenantId", "id", "name")
                              VALUES (${tenantId}::uuid, (${PREVIOUS}->>'id')::uuid, ${PREVIOUS}->>'name')
                                RETURNING ${PREVIOUS}`;
    const id = crypto.randomUUID();
    const out = await runForTenant(app.db, tenantId, [
      Prisma.sql`SELECT jsonb_build_object('id', ${id}::uuid, 'name', ${name}::text)`,
      insert,
    ]);
    expect(out).toEqual({ id, name });
    expect(await app.db.prisma.contactList.findFirst({ where: { tenantId, id }, select: { name: true } })).toEqual({
      name,
    });
    const refused = await runForTenant(app.db, tenantId, [
      Prisma.sql`SELECT jsonb_build_object('id', ${crypto.randomUUID()}::uuid, 'name', ${`${name}-2`}::text)
                 WHERE false`,
      insert,
    ]);
    expect(refused).toBeUndefined();
    expect(await app.db.prisma.contactList.count({ where: { tenantId, name: `${name}-2` } })).toBe(0);
  });

  it("a refusal keeps its SQLSTATE and rolls the whole call back", async () => {
    const name = `rb-${Date.now()}`;
    const err: any = await runForTenant(app.db, tenantId, [
      Prisma.sql`INSERT INTO "ContactList" ("tenantId", "name") VALUES (${tenantId}::uuid, ${name}::text)
                 RETURNING ${PREVIOUS}`,
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
      const body = {
        customerName: "Delegated Lead",
        customerPhone: "+34 600 111 222",
        zones: ["north", "sea view"],
        budget: { min: 100000, max: 250000 },
        notes: 'it\'s \\ "quoted"',
      };
      const r = await app.request("POST", "/public/v1/leads", {
        key,
        body,
        headers: { "Idempotency-Key": "delegated-lead-1" },
      });
      expect(r.status, r.text).toBe(201);
      expect(r.body).toMatchObject({
        customerName: "Delegated Lead",
        zones: ["north", "sea view"],
        notes: body.notes,
        source: "api",
      });
      expect(r.body.stageId).toEqual(expect.any(String));
      const got = await app.request("GET", `/public/v1/leads/${r.body.id}`, { key });
      expect(got.body).toEqual(r.body);
      const again = await app.request("POST", "/public/v1/leads", {
        key,
        body,
        headers: { "Idempotency-Key": "delegated-lead-1" },
      });
      expect(again.status).toBe(201);
      expect(again.headers.get("idempotent-replayed")).toBe("true");
      expect(again.body).toEqual(r.body);
      expect(await app.db.prisma.lead.count({ where: { tenantId, customerName: "Delegated Lead" } })).toBe(1);
      // Both tries went through a call of three statements (values, claim, row): the replay's found the key taken.
      expect(
        calls.filter(
          (c) => c.length === 3 && c[2]!.includes('INSERT INTO "Lead"') && c[1]!.includes('"IdempotencyRecord"'),
        ),
      ).toHaveLength(2);
      const missing = await app.request("POST", "/public/v1/leads", {
        key,
        body: { customerName: "Nowhere", stageId: crypto.randomUUID() },
        headers: { "Idempotency-Key": "delegated-lead-2" },
      });
      expectEnvelope(missing, 404, "NOT_FOUND");
      expect(await app.db.prisma.lead.count({ where: { tenantId, customerName: "Nowhere" } })).toBe(0);
      expect(await app.db.prisma.idempotencyRecord.count({ where: { tenantId, key: "delegated-lead-2" } })).toBe(0);
    });

    it("POST /appointments: 201 (calendar lock and checks in the call), then the overlap is a 409 with nothing written", async () => {
      const slot = {
        assignedUserId: ana,
        title: "Delegated visit",
        appointmentType: "visit",
        startsAt: "2027-05-03T09:00:00Z",
        endsAt: "2027-05-03T10:00:00Z",
      };
      const r = await app.request("POST", "/public/v1/appointments", {
        key,
        body: slot,
        headers: { "Idempotency-Key": "delegated-appt-1" },
      });
      expect(r.status, r.text).toBe(201);
      expect(r.body).toMatchObject({
        title: "Delegated visit",
        startsAt: "2027-05-03T09:00:00.000Z",
        status: "scheduled",
      });
      expect(
        calls.some((c) => /pg_advisory_xact_lock/.test(c[0]!) && c.at(-1)!.includes('INSERT INTO "Appointment"')),
      ).toBe(true);
      const clash = await app.request("POST", "/public/v1/appointments", { key, body: { ...slot, title: "Clash" } });
      expectEnvelope(clash, 409, "APPOINTMENT_OVERLAP");
      expect(await app.db.prisma.appointment.count({ where: { tenantId, title: "Clash" } })).toBe(0);
    });

    it("each tenant's call writes that tenant's rows only", async () => {
      const r = await app.request("POST", "/public/v1/leads", { key: other.key, body: { customerName: "Beta Lead" } });
      expect(r.status).toBe(201);
      expect(await app.db.prisma.lead.count({ where: { tenantId: other.tenantId, customerName: "Beta Lead" } })).toBe(
        1,
      );
      expect(await app.db.prisma.lead.count({ where: { tenantId, customerName: "Beta Lead" } })).toBe(0);
    });
  });

  it("the service uses the call where tenant_exec is distributed (Citus), else one prepared statement", async () => {
    useTenantDelegation(app.db, undefined);
    expect(await tenantDelegation(app.db)).toBe(onCitus);
  });

  it.runIf(onCitus)(
    "on Citus: distributed by db:distribute by its tenant argument, co-located with the tenant tables",
    async () => {
      const [fn] = await app.db.sql.query<{ arg: number; colocated: boolean }>(
        `SELECT o.distribution_argument_index AS arg,
              o.colocationid = (SELECT colocationid FROM pg_dist_partition
                WHERE logicalrelid = '"Lead"'::regclass) AS colocated
         FROM pg_dist_object o WHERE o.classid = 'pg_proc'::regclass AND o.objid = to_regprocedure($1)`,
        [TENANT_EXEC],
      );
      expect(fn).toEqual({ arg: 0, colocated: true });
    },
  );
});

// On Citus the call is delegated to the worker holding the tenant's shards (Citus's function call
// delegation), where its statements are ordinary statements over the distributed tables: Citus runs
// each on the local shard (local execution). No statement names a shard, no session state is kept.
describe.runIf(onCitus)("tenant_exec on the tenant's worker (Citus)", () => {
  const nodes: Record<"holder" | "other", pg.Client> = {} as never;
  beforeAll(async () => {
    const admin = new pg.Client({ connectionString: app.testDb.directUrl });
    await admin.connect();
    try {
      const rows = (
        await admin.query<{ host: string; port: number; holds: boolean }>(
          `SELECT n.nodename AS host, n.nodeport AS port,
                  EXISTS (SELECT 1 FROM pg_dist_placement p WHERE p.groupid = n.groupid
                    AND p.shardid = get_shard_id_for_distribution_column('"Lead"', $1::uuid)) AS holds
             FROM pg_dist_node n WHERE n.groupid <> 0 AND n.noderole = 'primary' ORDER BY n.nodeid`,
          [tenantId],
        )
      ).rows;
      for (const [role, node] of [
        ["holder", rows.find((r) => r.holds)],
        ["other", rows.find((r) => !r.holds)],
      ] as const) {
        nodes[role] = new pg.Client({ connectionString: onSameDatabase(app.testDb.directUrl!, node!) });
        await nodes[role].connect();
      }
    } finally {
      await admin.end();
    }
  });
  afterAll(async () => {
    await Promise.all(Object.values(nodes).map((c) => c.end()));
  });

  /** A call's result on `node`, and whether Citus ran its statement on a local shard there. */
  async function callOn(node: pg.Client, statement: string): Promise<{ result: unknown; local: boolean }> {
    let local = false;
    const listen = (n: { message?: string }) => {
      if (n.message?.startsWith("executing the command locally")) local = true;
    };
    node.on("notice", listen);
    try {
      await node.query("SET citus.log_local_commands = on; SET client_min_messages = notice");
      const { rows } = await node.query<{ result: unknown }>(
        `SELECT "tenant_exec"($1::uuid, ARRAY[$2::text], $3::text[]) AS "result"`,
        [tenantId, statement, [tenantId]],
      );
      return { result: rows[0]!.result, local };
    } finally {
      await node.query("RESET citus.log_local_commands; RESET client_min_messages");
      node.off("notice", listen);
    }
  }
  const count =
    `SELECT jsonb_build_object('n', count(*)) AS "result" FROM "Lead" l JOIN "Tenant" t ON t."id" = l."tenantId" ` +
    `WHERE l."tenantId" = ($1[1])::uuid`;

  it("a call on the worker holding the tenant runs its statement on the local shard; elsewhere Citus sends it there; the same answer as through the coordinator", async () => {
    const there = await callOn(nodes.holder, count);
    const elsewhere = await callOn(nodes.other, count);
    const [viaCoordinator] = await readRaw(app.db)<{ n: number }>(
      Prisma.sql`SELECT count(*)::int AS n FROM "Lead" l JOIN "Tenant" t ON t."id" = l."tenantId"
                 WHERE l."tenantId" = ${tenantId}::uuid`,
    );
    expect(there).toEqual({ result: { n: viaCoordinator!.n }, local: true });
    expect(elsewhere.result).toEqual({ n: viaCoordinator!.n });
    expect(elsewhere.local).toBe(false);
  });

  it("no function of the layer over Citus's shards is left (prisma/functions/retired.txt)", async () => {
    const { rows } = await nodes.holder.query<{ n: string }>(
      `SELECT proname AS n FROM pg_proc WHERE proname = ANY($1::text[])`,
      [
        [
          "tenant_exec_local",
          "tenant_exec_rename",
          "tenant_exec_names",
          "tenant_shards",
          "tenant_shard_here",
          "local_call",
          "local_call_limit",
        ],
      ],
    );
    expect(rows).toEqual([]);
  });
});
