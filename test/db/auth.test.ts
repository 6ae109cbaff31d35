// Authentication, plan gate, scopes and the check order (spec "Authentication").
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createKey, revokeKey, setPlan } from "../../server/admin/operations.js";
import { ALL_SCOPES } from "../../server/auth/scopes.js";
import { expectEnvelope, startApp, type TestApp } from "../helpers/app.js";
import { fixture, tenant } from "../helpers/fixtures.js";

let app: TestApp;
let ids: Awaited<ReturnType<TestApp["load"]>>["tenants"][string];
let other: typeof ids;

beforeAll(async () => {
  app = await startApp();
  const loaded = await app.load(
    fixture(
      tenant("acme", {
        users: [
          { ref: "ana", name: "Ana", email: "ana@acme.test" },
          {
            ref: "reader",
            name: "Reader",
            email: "r@acme.test",
            apiGrant: ["tenant:leads.read", "tenant:tickets.read"],
          },
          { ref: "nogrant", name: "No grant", email: "n@acme.test", apiGrant: [] },
        ],
        apiKeys: [
          { ref: "full", owner: "ana", scopes: "all" },
          { ref: "narrowed", owner: "reader", scopes: "all" },
          { ref: "leadsonly", owner: "ana", scopes: ["tenant:leads.read"] },
          { ref: "empty", owner: "nogrant", scopes: "all" },
          { ref: "expired", owner: "ana", scopes: "all", expiresAt: "2020-01-01T00:00:00Z" },
          { ref: "revoked", owner: "ana", scopes: "all", revoked: true },
        ],
      }),
      tenant("starter", { plan: "starter" }),
      tenant("ent", { plan: "enterprise" }),
    ),
  );
  ids = loaded.tenants.acme!;
  other = loaded.tenants.starter!;
  (app as any).ent = loaded.tenants.ent!;
});
afterAll(() => app.close());

const me = (key?: string | null, headers: Record<string, string> = {}) =>
  app.request("GET", "/public/v1/me", { key, headers });

describe("401 INVALID_CREDENTIALS / TOKEN_EXPIRED", () => {
  it("missing key", async () => expectEnvelope(await me(), 401, "INVALID_CREDENTIALS"));
  it("empty key", async () => expectEnvelope(await me(null, { "X-API-Key": "" }), 401, "INVALID_CREDENTIALS"));
  it("garbage key", async () => expectEnvelope(await me("not-a-key"), 401, "INVALID_CREDENTIALS"));
  it("mistyped key (right prefix, one character changed)", async () => {
    const k = ids.apiKeys.full!.key;
    const typo = k.slice(0, -1) + (k.endsWith("A") ? "B" : "A");
    expectEnvelope(await me(typo), 401, "INVALID_CREDENTIALS");
  });
  it("unknown well-formed key", async () =>
    expectEnvelope(await me(`crm_${"A".repeat(12)}_${"b".repeat(40)}`), 401, "INVALID_CREDENTIALS"));
  it("revoked key", async () => expectEnvelope(await me(ids.apiKeys.revoked!.key), 401, "INVALID_CREDENTIALS"));
  it("expired key", async () => expectEnvelope(await me(ids.apiKeys.expired!.key), 401, "TOKEN_EXPIRED"));
  it("a key revoked through the admin operation stops on the next request", async () => {
    const k = await createKey(app.db, ids.id, ids.users.ana!, "all");
    expect((await me(k.key)).status).toBe(200);
    await revokeKey(app.db, k.id);
    expectEnvelope(await me(k.key), 401, "INVALID_CREDENTIALS");
  });
  it("a key whose expiry passes stops with TOKEN_EXPIRED", async () => {
    const soon = new Date(Date.now() + 60_000).toISOString();
    const k = await createKey(app.db, ids.id, ids.users.ana!, "all", soon);
    expect((await me(k.key)).status).toBe(200);
    app.setNow(new Date(Date.now() + 120_000));
    try {
      expectEnvelope(await me(k.key), 401, "TOKEN_EXPIRED");
    } finally {
      app.setNow(undefined);
    }
  });
  it("401 on every path, including unknown ones and writes", async () => {
    expectEnvelope(await app.request("GET", "/public/v1/leads"), 401, "INVALID_CREDENTIALS");
    expectEnvelope(await app.request("POST", "/public/v1/leads", { body: {} }), 401, "INVALID_CREDENTIALS");
    expectEnvelope(await app.request("GET", "/public/v1/nothing-here"), 401, "INVALID_CREDENTIALS");
  });
  it("401 comes before a malformed body", async () => {
    expectEnvelope(
      await app.request("POST", "/public/v1/leads", { raw: "{oops", headers: { "Content-Type": "application/json" } }),
      401,
      "INVALID_CREDENTIALS",
    );
  });
});

describe("plan gate", () => {
  it("starter tenant → 403 PLAN_NOT_ELIGIBLE even with every scope", async () => {
    expectEnvelope(await me(other.apiKeys.full!.key), 403, "PLAN_NOT_ELIGIBLE");
    expectEnvelope(
      await app.request("GET", "/public/v1/leads", { key: other.apiKeys.full!.key }),
      403,
      "PLAN_NOT_ELIGIBLE",
    );
  });
  it("plan change takes effect on the next request, both ways", async () => {
    const key = ids.apiKeys.full!.key;
    expect((await me(key)).body.plan).toBe("pro");
    await setPlan(app.db, ids.id, "starter");
    expectEnvelope(await me(key), 403, "PLAN_NOT_ELIGIBLE");
    await setPlan(app.db, ids.id, "enterprise");
    const r = await me(key);
    expect(r.status).toBe(200);
    expect(r.body.plan).toBe("enterprise");
    expect(r.body.rateLimit).toEqual({ perMinute: 600, perDay: 200000 });
    expect(r.headers.get("x-ratelimit-limit")).toBe("600");
    await setPlan(app.db, ids.id, "pro");
    expect((await me(key)).body.rateLimit).toEqual({ perMinute: 180, perDay: 50000 });
  });
  it("expired beats plan: 401 before 403", async () => {
    await setPlan(app.db, ids.id, "starter");
    try {
      expectEnvelope(await me(ids.apiKeys.expired!.key), 401, "TOKEN_EXPIRED");
    } finally {
      await setPlan(app.db, ids.id, "pro");
    }
  });
});

describe("GET /me and scopes", () => {
  it("returns exactly the introspection object", async () => {
    const r = await me(ids.apiKeys.full!.key);
    expect(r.status).toBe(200);
    expect(Object.keys(r.body).sort()).toEqual(["keyPrefix", "plan", "rateLimit", "scopes", "tenantId", "usage"]);
    expect(r.body.tenantId).toBe(ids.id);
    expect(r.body.keyPrefix).toBe(ids.apiKeys.full!.prefix);
    expect(ids.apiKeys.full!.key.startsWith(r.body.keyPrefix)).toBe(true);
    expect(r.body.scopes.sort()).toEqual([...ALL_SCOPES].sort());
    expect(r.body.rateLimit.perMinute).toBe(Number(r.headers.get("x-ratelimit-limit")));
  });
  it("effective scopes = key scopes ∩ owner's grant", async () => {
    expect((await me(ids.apiKeys.narrowed!.key)).body.scopes.sort()).toEqual([
      "tenant:leads.read",
      "tenant:tickets.read",
    ]);
    expect((await me(ids.apiKeys.leadsonly!.key)).body.scopes).toEqual(["tenant:leads.read"]);
  });
  it("an empty effective set is valid: /me works, everything else is 403", async () => {
    const key = ids.apiKeys.empty!.key;
    const r = await me(key);
    expect(r.status).toBe(200);
    expect(r.body.scopes).toEqual([]);
    expectEnvelope(await app.request("GET", "/public/v1/leads", { key }), 403, "PERMISSION_DENIED");
  });
  it("enterprise tenant's ceilings", async () => {
    const r = await me((app as any).ent.apiKeys.full.key);
    expect(r.body).toMatchObject({ plan: "enterprise", rateLimit: { perMinute: 600, perDay: 200000 } });
  });
  it("the owner's grant narrows: a key with leads.manage whose owner only has leads.read cannot create", async () => {
    const key = ids.apiKeys.narrowed!.key;
    expectEnvelope(
      await app.request("POST", "/public/v1/leads", { key, body: { customerName: "X" } }),
      403,
      "PERMISSION_DENIED",
    );
    const r = await app.request("GET", "/public/v1/leads", { key });
    expect(r.status).not.toBe(403);
  });
  it("another resource's manage scope does not cover it; read does not cover manage", async () => {
    const key = ids.apiKeys.leadsonly!.key;
    for (const [method, path] of [
      ["POST", "/public/v1/leads"],
      ["GET", "/public/v1/contacts"],
      ["POST", "/public/v1/contacts"],
      ["GET", "/public/v1/conversations"],
      ["GET", "/public/v1/appointments"],
      ["GET", "/public/v1/availability"],
      ["GET", "/public/v1/tickets"],
      ["POST", "/public/v1/tickets"],
    ] as const) {
      const r = await app.request(method, path, { key, ...(method === "POST" ? { body: {} } : {}) });
      expectEnvelope(r, 403, "PERMISSION_DENIED");
    }
  });
  it("scope 403 comes before validation 422 and before 404", async () => {
    const key = ids.apiKeys.leadsonly!.key;
    expectEnvelope(
      await app.request("POST", "/public/v1/leads", {
        key,
        raw: "{bad",
        headers: { "Content-Type": "application/json" },
      }),
      403,
      "PERMISSION_DENIED",
    );
    expectEnvelope(
      await app.request("PATCH", `/public/v1/leads/not-a-uuid`, { key, body: {} }),
      403,
      "PERMISSION_DENIED",
    );
  });
  it("keys are stored hashed: no raw key in the database", async () => {
    const rows = await app.db.sql.query<{ prefix: string; keyHash: string }>(
      `SELECT "prefix", "keyHash" FROM "ApiKey"`,
    );
    const raw = ids.apiKeys.full!.key;
    expect(rows.some((r) => r.keyHash.includes(raw) || raw === r.keyHash)).toBe(false);
    expect(rows.every((r) => /^[0-9a-f]{64}$/.test(r.keyHash))).toBe(true);
  });
});
