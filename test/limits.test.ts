// Rate limits (spec "Limits", issue 2 §6): headers on every response, 429 + Retry-After,
// per-key independence, minute and day windows, tenant overrides, shared across instances on Redis.
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { setPlanLimits, setTenantLimits } from "../server/admin/operations.js";
import { hashKey } from "../server/auth/keys.js";
import { Quotas, redisQuotaKeys } from "../server/limits/quotas.js";
import { expectEnvelope, startApp, type TestApp } from "./helpers/app.js";
import { fixture, tenant } from "./helpers/fixtures.js";

let app: TestApp & { quotaNamespace: string; testDb: any };
let ids: Awaited<ReturnType<TestApp["load"]>>["tenants"][string];

beforeAll(async () => {
  app = await startApp();
  const loaded = await app.load(
    fixture(
      tenant("acme", {
        rateLimit: { perMinute: 5, perDay: 1000 },
        apiKeys: [
          { ref: "k1", owner: "ana", scopes: "all" },
          { ref: "k2", owner: "ana", scopes: "all" },
          { ref: "k3", owner: "ana", scopes: "all" },
          { ref: "k4", owner: "ana", scopes: "all" },
          { ref: "k5", owner: "ana", scopes: "all" },
          { ref: "k6", owner: "ana", scopes: [] },
        ],
      }),
      tenant("daily", { rateLimit: { perMinute: 100, perDay: 3 } }),
      tenant("plain"),
    ),
  );
  ids = loaded.tenants.acme!;
  (app as any).daily = loaded.tenants.daily!;
  (app as any).plain = loaded.tenants.plain!;
});
afterAll(() => app.close());

function headers(r: { headers: Headers }) {
  return {
    limit: Number(r.headers.get("x-ratelimit-limit")),
    remaining: Number(r.headers.get("x-ratelimit-remaining")),
    reset: Number(r.headers.get("x-ratelimit-reset")),
  };
}

describe("rate-limit headers", () => {
  it("every response carries integer X-RateLimit-* with a future reset", async () => {
    const now = Math.floor(Date.now() / 1000);
    const key = (app as any).plain.apiKeys.full.key;
    for (const r of [
      await app.request("GET", "/public/v1/me", { key }),
      await app.request("GET", "/public/v1/me"),
      await app.request("GET", "/public/v1/me", { key: "garbage" }),
      await app.request("GET", "/public/v1/nope", { key }),
      await app.request("POST", "/public/v1/leads", { key, raw: "{", headers: { "Content-Type": "application/json" } }),
    ]) {
      for (const h of ["x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"]) expect(r.headers.get(h)).toMatch(/^\d+$/);
      expect(headers(r).reset).toBeGreaterThan(now);
      expect(headers(r).reset).toBeLessThanOrEqual(Math.floor(Date.now() / 1000) + 61);
    }
  });
  it("/me rateLimit matches the X-RateLimit-Limit of the same response (plan ceiling)", async () => {
    const r = await app.request("GET", "/public/v1/me", { key: (app as any).plain.apiKeys.full.key });
    expect(r.body.rateLimit).toEqual({ perMinute: 180, perDay: 50000 });
    expect(headers(r).limit).toBe(180);
  });
  it("a tenant override replaces the plan's ceilings, and clearing it restores them", async () => {
    const t = (app as any).plain;
    await setTenantLimits(app.db, t.id, "400", "9000");
    let r = await app.request("GET", "/public/v1/me", { key: t.apiKeys.full.key });
    expect(r.body.rateLimit).toEqual({ perMinute: 400, perDay: 9000 });
    expect(headers(r).limit).toBe(400);
    await setTenantLimits(app.db, t.id, "clear");
    r = await app.request("GET", "/public/v1/me", { key: t.apiKeys.full.key });
    expect(r.body.rateLimit).toEqual({ perMinute: 180, perDay: 50000 });
  });
  it("plan ceilings can change", async () => {
    const t = (app as any).plain;
    await setPlanLimits(app.db, "pro", "190", "50001");
    try {
      const r = await app.request("GET", "/public/v1/me", { key: t.apiKeys.full.key });
      expect(r.body.rateLimit).toEqual({ perMinute: 190, perDay: 50001 });
      expect(headers(r).limit).toBe(190);
    } finally {
      await setPlanLimits(app.db, "pro", "180", "50000");
    }
  });
});

describe("minute window", () => {
  it("admits exactly the ceiling, then 429 RATE_LIMIT_EXCEEDED with Retry-After", async () => {
    const key = ids.apiKeys.k1!.key;
    const remaining: number[] = [];
    for (let i = 0; i < 5; i++) {
      const r = await app.request("GET", "/public/v1/me", { key });
      expect(r.status).toBe(200);
      remaining.push(headers(r).remaining);
    }
    expect(remaining).toEqual([4, 3, 2, 1, 0]);
    const r = await app.request("GET", "/public/v1/me", { key });
    expectEnvelope(r, 429, "RATE_LIMIT_EXCEEDED");
    expect(headers(r)).toMatchObject({ limit: 5, remaining: 0 });
    const retry = Number(r.headers.get("retry-after"));
    expect(Number.isInteger(retry) && retry >= 1 && retry <= 60).toBe(true);
  });
  it("keys of one tenant have independent quotas", async () => {
    const a = ids.apiKeys.k2!.key;
    const b = ids.apiKeys.k3!.key;
    for (let i = 0; i < 5; i++) expect((await app.request("GET", "/public/v1/me", { key: a })).status).toBe(200);
    expect((await app.request("GET", "/public/v1/me", { key: a })).status).toBe(429);
    const r = await app.request("GET", "/public/v1/me", { key: b });
    expect(r.status).toBe(200);
    expect(headers(r).remaining).toBe(4);
  });
  it("X-Forwarded-For gives no extra quota", async () => {
    const key = ids.apiKeys.k4!.key;
    for (let i = 0; i < 5; i++) await app.request("GET", "/public/v1/me", { key, headers: { "X-Forwarded-For": `10.0.0.${i}` } });
    expectEnvelope(await app.request("GET", "/public/v1/me", { key, headers: { "X-Forwarded-For": "10.9.9.9" } }), 429, "RATE_LIMIT_EXCEEDED");
  });
  it("429 comes before the scope check (order 401 → 403 plan → 429 → 403 scope)", async () => {
    const key = ids.apiKeys.k6!.key; // no scopes
    for (let i = 0; i < 5; i++) expectEnvelope(await app.request("GET", "/public/v1/leads", { key }), 403, "PERMISSION_DENIED");
    expectEnvelope(await app.request("GET", "/public/v1/leads", { key }), 429, "RATE_LIMIT_EXCEEDED");
  });
});

// The in-process windows (no Redis, or Redis down): rate-limiter-flexible's memory store ends a window
// when Date.now() passes its expiry, and the guard computes X-RateLimit-Reset from the services'
// clock (new Date()), so faking Date alone moves both (timers stay real: nothing else waits on it).
describe("the in-memory minute window", () => {
  it("after its minute, a request is admitted with the window reset; Retry-After and X-RateLimit-Reset agree", async () => {
    const mem = await startApp({ db: app.testDb, config: { redisUrl: undefined, redisClusterNodes: undefined } });
    try {
      expect(mem.services.quotas.shared).toBe(false);
      const loaded = await mem.load(fixture(tenant("memwin", { rateLimit: { perMinute: 3, perDay: 1000 } })));
      const key = loaded.tenants.memwin!.apiKeys.full!.key;
      const t0 = Math.floor(Date.now() / 1000) * 1000 + 250; // a known instant, a quarter second into its second
      const seconds = (ms: number) => Math.ceil(ms / 1000);
      vi.useFakeTimers({ toFake: ["Date"], now: t0 });
      const me = () => mem.request("GET", "/public/v1/me", { key });
      const admitted = async (remaining: number, windowStart: number) => {
        const r = await me();
        expect(r.status).toBe(200);
        expect(headers(r)).toEqual({ limit: 3, remaining, reset: seconds(windowStart + 60_000) });
        expect(r.headers.get("retry-after")).toBeNull();
      };
      const refused = async (windowStart: number) => {
        const r = await me();
        expectEnvelope(r, 429, "RATE_LIMIT_EXCEEDED");
        const now = Date.now();
        const retryAfter = r.headers.get("retry-after");
        expect(retryAfter).toMatch(/^\d+$/);
        expect(headers(r)).toEqual({ limit: 3, remaining: 0, reset: seconds(windowStart + 60_000) });
        // Consistent: Retry-After is the wait until that reset, rounded up to whole seconds.
        expect(Number(retryAfter)).toBe(seconds(windowStart + 60_000 - now));
        expect(r.body.details.retryAfter).toBe(Number(retryAfter));
        return Number(retryAfter);
      };
      for (const remaining of [2, 1, 0]) await admitted(remaining, t0);
      expect(await refused(t0)).toBe(60);
      vi.setSystemTime(t0 + 30_000);
      expect(await refused(t0)).toBe(30);
      vi.setSystemTime(t0 + 59_999); // the last millisecond of the window
      expect(await refused(t0)).toBe(1);
      // The window is over: a new one starts with this request, at the ceiling less one.
      const t1 = t0 + 60_000;
      vi.setSystemTime(t1);
      for (const remaining of [2, 1, 0]) await admitted(remaining, t1);
      expect(await refused(t1)).toBe(60);
    } finally {
      vi.useRealTimers();
      await mem.close();
    }
  });
});

describe("day window", () => {
  it("exceeding the day ceiling gives 429 with Retry-After up to a day", async () => {
    const key = (app as any).daily.apiKeys.full.key;
    for (let i = 0; i < 3; i++) expect((await app.request("GET", "/public/v1/me", { key })).status).toBe(200);
    const r = await app.request("GET", "/public/v1/me", { key });
    expectEnvelope(r, 429, "RATE_LIMIT_EXCEEDED");
    expect(headers(r)).toMatchObject({ limit: 100, remaining: 0 });
    const retry = Number(r.headers.get("retry-after"));
    expect(retry).toBeGreaterThan(60);
    expect(retry).toBeLessThanOrEqual(86400);
  });
});

describe.skipIf(!process.env.REDIS_URL && !process.env.REDIS_CLUSTER_NODES)("two instances on one Redis", () => {
  it("share one minute quota", async () => {
    const second = await startApp({ db: app.testDb, quotaNamespace: app.quotaNamespace });
    try {
      const loaded = await app.load(fixture(tenant("shared", { rateLimit: { perMinute: 6, perDay: 1000 } })));
      const key = loaded.tenants.shared!.apiKeys.full!.key;
      const statuses: number[] = [];
      for (let i = 0; i < 8; i++) statuses.push((await (i % 2 ? second : app).request("GET", "/public/v1/me", { key })).status);
      expect(statuses).toEqual([200, 200, 200, 200, 200, 200, 429, 429]);
    } finally {
      await second.close();
    }
  });
});

// server/auth/guard.ts counts a request early (beside the key lookup) when no other request of the
// instance is in flight, and after the lookup otherwise; both must leave Redis in the same state.
// Every request of these tests is sequential (the early path); `busy` raises the instance's in-flight
// count so that the guard takes the other path.
describe.skipIf(!process.env.REDIS_URL && !process.env.REDIS_CLUSTER_NODES)("what a request leaves in the Redis windows", () => {
  const windows = async (key: string) => {
    const [m, d] = redisQuotaKeys(app.quotaNamespace, hashKey(key));
    const redis = app.services.redis!;
    return { minute: await redis.get(m), day: await redis.get(d), minuteTtl: await redis.pttl(m), dayTtl: await redis.pttl(d) };
  };
  for (const busy of [false, true]) {
    const path = busy ? "a busy instance (counted after the lookup)" : "an idle instance (counted beside the lookup)";
    const withLoad = async <T>(fn: () => Promise<T>): Promise<T> => {
      if (busy) app.services.metrics.inFlight += 5;
      try {
        return await fn();
      } finally {
        if (busy) app.services.metrics.inFlight -= 5;
      }
    };
    it(`${path}: a well-formed key that does not authenticate counts in neither window`, async () => {
      const unknown = `crm_${"Z".repeat(12)}_${busy ? "B" : "I"}${"x".repeat(39)}`;
      const wrongSecret = ids.apiKeys.k6!.key.slice(0, -1) + (ids.apiKeys.k6!.key.endsWith("a") ? "b" : "a"); // right prefix, wrong secret
      for (const key of [unknown, wrongSecret]) {
        for (let i = 0; i < 3; i++) {
          const r = await withLoad(() => app.request("GET", "/public/v1/me", { key }));
          expectEnvelope(r, 401, "INVALID_CREDENTIALS");
          expect(headers(r)).toMatchObject({ limit: 60, remaining: 60 });
        }
        expect(await windows(key)).toEqual({ minute: null, day: null, minuteTtl: -2, dayTtl: -2 });
      }
    });
    it(`${path}: a key of a plan without API access counts in neither window`, async () => {
      const loaded = await app.load(fixture(tenant(`starter${busy ? "b" : "i"}`, { plan: "starter" })));
      const key = loaded.tenants[`starter${busy ? "b" : "i"}`]!.apiKeys.full!.key;
      const r = await withLoad(() => app.request("GET", "/public/v1/me", { key }));
      expectEnvelope(r, 403, "PLAN_NOT_ELIGIBLE");
      expect(headers(r)).toMatchObject({ limit: 60, remaining: 60 });
      expect(await windows(key)).toMatchObject({ minute: null, day: null });
    });
    it(`${path}: both windows count an admitted request, with the windows' TTLs; over the minute ceiling, the day window does not count`, async () => {
      const ref = `tight${busy ? "b" : "i"}`;
      const loaded = await app.load(fixture(tenant(ref, { rateLimit: { perMinute: 2, perDay: 1000 } })));
      const key = loaded.tenants[ref]!.apiKeys.full!.key;
      const statuses: number[] = [];
      for (let i = 0; i < 5; i++) statuses.push((await withLoad(() => app.request("GET", "/public/v1/me", { key }))).status);
      expect(statuses).toEqual([200, 200, 429, 429, 429]);
      const w = await windows(key);
      expect(w).toMatchObject({ minute: "5", day: "2" });
      expect(w.minuteTtl).toBeGreaterThan(50_000);
      expect(w.minuteTtl).toBeLessThanOrEqual(60_000);
      expect(w.dayTtl).toBeGreaterThan(86_300_000);
      expect(w.dayTtl).toBeLessThanOrEqual(86_400_000);
    });
  }
});

describe("a count given back when Redis stops answering (process memory)", () => {
  // A Redis client whose scripts all fail: count() falls back to the in-process windows, and what it
  // counted there is given back there.
  const failing = {
    defineCommand(this: Record<string, unknown>, name: string) {
      this[name] = () => Promise.reject(new Error("connection refused"));
    },
  };
  it("count() never rejects, and refund() leaves nothing in the in-process windows", async () => {
    const quotas = new Quotas(failing as any, `rl-mem-${Date.now()}`);
    expect(quotas.shared).toBe(true);
    const hash = hashKey("crm_" + "m".repeat(12) + "_" + "n".repeat(40));
    const first = await quotas.count(hash);
    expect(first).toMatchObject({ memory: true, minute: { consumed: 1 }, day: { consumed: 1 } });
    expect(quotas.fallback).toBe(true);
    const after = await quotas.refund(hash, first, 60);
    expect(after).toMatchObject({ limit: 60, remaining: 60 });
    const again = await quotas.count(hash);
    expect(again).toMatchObject({ minute: { consumed: 1 }, day: { consumed: 1 } });
    // Over the minute ceiling, settle() gives the day window back.
    const q = await quotas.settle(hash, await quotas.count(hash), { perMinute: 1, perDay: 10 });
    expect(q).toMatchObject({ remaining: 0, window: "minute" });
    expect(await quotas.count(hash)).toMatchObject({ minute: { consumed: 3 }, day: { consumed: 2 } });
  });
});
