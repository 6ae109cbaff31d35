// The key lookup's forms (server/auth/authenticate.ts): over the four reference tables, or — on a Citus
// node holding a placement of each (a coordinator in the metadata) — over those placements, which
// PostgreSQL plans once per connection where Citus would plan and deparse the join on every request.
// Everywhere: how the form is chosen and what a placement gone since (42P01) does. On a Citus cluster:
// the form the service sends, and that a revocation, a plan change and a limit override still apply
// on the very next request.
// @topology pooler citus
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createKey, revokeKey, setPlan, setTenantLimits } from "../../server/admin/operations.js";
import { authenticate, isKeyLookup, isLocalKeyLookup, LOCAL_PLACEMENTS_SQL, LOOKUP, LOOKUP_CALL } from "../../server/auth/authenticate.js";
import { hashKey, keyPrefix } from "../../server/auth/keys.js";
import type { Database, QueryOptions } from "../../server/db/client.js";
import { citusCluster } from "../helpers/cluster.js";
import { directBaseUrl, expectEnvelope, freshDatabase, startApp, type TestApp } from "../helpers/app.js";
import { fixture, tenant } from "../helpers/fixtures.js";

const onCitus = Boolean(process.env.DATABASE_URL) && (await citusCluster(directBaseUrl()!)) !== null;

const KEY = "crm_ABCDEFGHabcd_0123456789abcdefghijklmnopqrstuvwxyzABCD";
const row = {
  id: "k1", keyHash: hashKey(KEY), expiresAt: null, revokedAt: null, scopes: ["tenant:leads.read"], tenantId: "t1", ownerId: "u1",
  apiGrant: ["tenant:leads.read"], plan: "pro", timezone: "UTC", defaultCountry: null, slotMinutes: 30, perMinute: 60, perDay: 1000,
};
const SHARDS = [
  { table: "ApiKey", shard: '"ApiKey_102008"' },
  { table: "User", shard: '"User_102011"' },
  { table: "Tenant", shard: '"Tenant_102010"' },
  { table: "PlanLimit", shard: '"PlanLimit_102009"' },
];

/** A PostgreSQL stand-in: `citus` whether the Citus catalog exists; `shards` the local placements; `gone` the placements' statement fails 42P01. */
function standIn(opts: { citus: boolean; shards: typeof SHARDS; gone?: () => boolean }) {
  const sent: { sql: string; opts?: QueryOptions }[] = [];
  const db = {
    kind: "postgres",
    sql: {
      query: async (sql: string, _params: unknown[], o?: QueryOptions) => {
        sent.push({ sql, opts: o });
        if (sql.includes("pg_dist_local_group') IS NOT NULL")) return [{ on: opts.citus }];
        if (sql === LOCAL_PLACEMENTS_SQL) return opts.shards;
        if (sql === LOOKUP) return [row];
        if (sql.includes('"ApiKey_102008"')) {
          if (opts.gone?.()) throw Object.assign(new Error('relation "ApiKey_102008" does not exist'), { code: "42P01" });
          return [row];
        }
        throw new Error(`unexpected statement ${sql.slice(0, 80)}`);
      },
    },
  } as unknown as Database;
  return { db, sent };
}

describe("the key lookup's form", () => {
  it("the key's prefix is what the stand-in's row is for", () => expect(keyPrefix(KEY)).not.toBeNull());

  it("PostgreSQL without Citus: over the tables (named, or the function's call where statements are not kept); found once", async () => {
    const { db, sent } = standIn({ citus: false, shards: [] });
    for (let i = 0; i < 3; i++) expect((await authenticate(db, KEY)).tenantId).toBe("t1");
    expect(sent.map((s) => (s.sql === LOOKUP ? "LOOKUP" : "catalog"))).toEqual(["catalog", "LOOKUP", "LOOKUP", "LOOKUP"]);
    expect(sent[1]!.opts).toEqual({ prepare: { unnamed: LOOKUP_CALL } });
  });

  it("Citus holding every placement: over the placements, named; a node lacking one of them: over the tables", async () => {
    const all = standIn({ citus: true, shards: SHARDS });
    expect((await authenticate(all.db, KEY)).tenantId).toBe("t1");
    const local = all.sent.at(-1)!;
    expect(local.sql).toBe(LOOKUP.replace('"ApiKey" k', '"ApiKey_102008" k').replace('"User" u', '"User_102011" u').replace('"Tenant" t', '"Tenant_102010" t').replace('"PlanLimit" p', '"PlanLimit_102009" p'));
    expect(local.opts).toEqual({ prepare: true });
    expect(isKeyLookup(local.sql) && isLocalKeyLookup(local.sql)).toBe(true);

    const some = standIn({ citus: true, shards: SHARDS.slice(0, 3) });
    expect((await authenticate(some.db, KEY)).tenantId).toBe("t1");
    expect(some.sent.at(-1)!.sql).toBe(LOOKUP);
  });

  it("a placement gone since it was found (42P01): this request over the tables, the next one finds the form again", async () => {
    let gone = false;
    const { db, sent } = standIn({ citus: true, shards: SHARDS, gone: () => gone });
    await authenticate(db, KEY);
    gone = true;
    sent.length = 0;
    expect((await authenticate(db, KEY)).tenantId).toBe("t1");
    expect(sent.map((s) => s.sql === LOOKUP)).toEqual([false, true]);
    sent.length = 0;
    gone = false;
    await authenticate(db, KEY);
    expect(sent.map((s) => (s.sql === LOCAL_PLACEMENTS_SQL ? "placements" : s.sql === LOOKUP ? "LOOKUP" : s.sql.includes("_102008") ? "local" : "catalog"))).toEqual([
      "catalog",
      "placements",
      "local",
    ]);
  });

  it("any other failure is the request's (a 500 or the outage it is), not hidden by a second statement", async () => {
    const db = {
      kind: "postgres",
      sql: {
        query: async (sql: string) => {
          if (sql.includes("pg_dist_local_group') IS NOT NULL")) return [{ on: true }];
          if (sql === LOCAL_PLACEMENTS_SQL) return SHARDS;
          throw Object.assign(new Error("canceling statement due to statement timeout"), { code: "57014" });
        },
      },
    } as unknown as Database;
    await expect(authenticate(db, KEY)).rejects.toMatchObject({ code: "57014" });
  });
});

describe.runIf(onCitus)("on a Citus cluster", () => {
  let app: TestApp;
  const seen: string[] = [];
  let ids: Awaited<ReturnType<TestApp["load"]>>["tenants"][string];
  beforeAll(async () => {
    app = await startApp({ db: await freshDatabase({ observe: (sql) => void seen.push(sql) }) });
    ids = (await app.load(fixture(tenant("acme", { users: [{ ref: "ana", name: "Ana", email: "ana@acme.test" }], apiKeys: [{ ref: "full", owner: "ana", scopes: "all" }] })))).tenants.acme!;
  }, 120_000);
  afterAll(() => app?.close());

  it("the service looks keys up over the coordinator's placements; revocation, plan and limits apply on the next request", async () => {
    const me = () => app.request("GET", "/public/v1/me", { key: ids.apiKeys.full!.key });
    seen.length = 0;
    expect((await me()).status).toBe(200);
    const lookups = seen.filter(isKeyLookup);
    expect(lookups).toHaveLength(1);
    expect(lookups[0]).not.toBe(LOOKUP);
    expect(lookups[0]).toMatch(/FROM "ApiKey_\d+" k/);

    // The placements are the rows Citus itself writes (every placement, in the writing transaction).
    await setTenantLimits(app.db, ids.id, "7", "1000");
    expect((await me()).headers.get("x-ratelimit-limit")).toBe("7");
    await setPlan(app.db, ids.id, "starter");
    expectEnvelope(await me(), 403, "PLAN_NOT_ELIGIBLE");
    await setPlan(app.db, ids.id, "pro");
    expect((await me()).status).toBe(200);
    const k = await createKey(app.db, ids.id, ids.users.ana!, "all");
    expect((await app.request("GET", "/public/v1/me", { key: k.key })).status).toBe(200);
    await revokeKey(app.db, k.id);
    expectEnvelope(await app.request("GET", "/public/v1/me", { key: k.key }), 401, "INVALID_CREDENTIALS");
  }, 60_000);
});
