// The key lookup (server/auth/authenticate.ts): one statement over the four reference tables, named
// where the connections keep named statements and the "ApiKey_lookup" call where they do not; on a
// Citus cluster the same statement (Citus answers it from the reference tables' local copies: no
// shard named), and a revocation, a plan change and a limit override apply on the very next request.
// @topology pooler citus
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createKey, revokeKey, setPlan, setTenantLimits } from "../../server/admin/operations.js";
import { authenticate, isKeyLookup, LOOKUP, LOOKUP_CALL } from "../../server/auth/authenticate.js";
import { hashKey, keyPrefix } from "../../server/auth/keys.js";
import type { Database, QueryOptions } from "../../server/db/client.js";
import { expectEnvelope, freshDatabase, startApp, type TestApp } from "../helpers/app.js";
import { fixture, tenant } from "../helpers/fixtures.js";

const KEY = "crm_ABCDEFGHabcd_0123456789abcdefghijklmnopqrstuvwxyzABCD";
const row = {
  id: "k1",
  keyHash: hashKey(KEY),
  expiresAt: null,
  revokedAt: null,
  scopes: ["tenant:leads.read"],
  tenantId: "t1",
  ownerId: "u1",
  apiGrant: ["tenant:leads.read"],
  plan: "pro",
  timezone: "UTC",
  defaultCountry: null,
  slotMinutes: 30,
  perMinute: 60,
  perDay: 1000,
};

describe("the key lookup's form", () => {
  it("one statement every request, named (or the function's call where statements are not kept); any failure is the request's", async () => {
    expect(keyPrefix(KEY)).not.toBeNull();
    const sent: { sql: string; opts?: QueryOptions }[] = [];
    let fail = false;
    const db = {
      kind: "postgres",
      sql: {
        query: async (sql: string, _params: unknown[], o?: QueryOptions) => {
          sent.push({ sql, opts: o });
          if (fail) throw Object.assign(new Error("canceling statement due to statement timeout"), { code: "57014" });
          return [row];
        },
      },
    } as unknown as Database;
    for (let i = 0; i < 3; i++) expect((await authenticate(db, KEY)).tenantId).toBe("t1");
    expect(sent).toEqual(
      Array.from({ length: 3 }, () => ({ sql: LOOKUP, opts: { prepare: { unnamed: LOOKUP_CALL } } })),
    );
    expect(isKeyLookup(LOOKUP) && isKeyLookup(LOOKUP_CALL)).toBe(true);
    expect(LOOKUP).not.toMatch(/_\d{6,}"/);
    fail = true;
    await expect(authenticate(db, KEY)).rejects.toMatchObject({ code: "57014" });
  });
});

describe("over HTTP, on every database backend", () => {
  let app: TestApp;
  const seen: string[] = [];
  let ids: Awaited<ReturnType<TestApp["load"]>>["tenants"][string];
  beforeAll(async () => {
    app = await startApp({ db: await freshDatabase({ observe: (sql) => void seen.push(sql) }) });
    ids = (
      await app.load(
        fixture(
          tenant("acme", {
            users: [{ ref: "ana", name: "Ana", email: "ana@acme.test" }],
            apiKeys: [{ ref: "full", owner: "ana", scopes: "all" }],
          }),
        ),
      )
    ).tenants.acme!;
  }, 120_000);
  afterAll(() => app?.close());

  it("the service looks keys up with the one statement; revocation, plan and limits apply on the next request", async () => {
    const me = () => app.request("GET", "/public/v1/me", { key: ids.apiKeys.full!.key });
    seen.length = 0;
    expect((await me()).status).toBe(200);
    const lookups = seen.filter(isKeyLookup);
    expect(lookups).toHaveLength(1);
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
