// Rate limits (spec "Limits"): headers on every response, 429 + Retry-After,
// per-key independence, minute and day windows, tenant overrides, shared across instances on Redis.
// @topology redis
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { setPlanLimits, setTenantLimits } from "../../server/admin/operations.js";
import { hashKey } from "../../server/auth/keys.js";
import { AppError } from "../../server/errors.js";
import { Quotas, redisQuotaKeys } from "../../server/limits/quotas.js";
import { expectEnvelope, startApp, type TestApp } from "../helpers/app.js";
import { fixture, tenant } from "../helpers/fixtures.js";

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
      for (const h of ["x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"])
        expect(r.headers.get(h)).toMatch(/^\d+$/);
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
    for (let i = 0; i < 5; i++)
      await app.request("GET", "/public/v1/me", { key, headers: { "X-Forwarded-For": `10.0.0.${i}` } });
    expectEnvelope(
      await app.request("GET", "/public/v1/me", { key, headers: { "X-Forwarded-For": "10.9.9.9" } }),
      429,
      "RATE_LIMIT_EXCEEDED",
    );
  });
  it("429 comes before the scope check (order 401 → 403 plan → 429 → 403 scope)", async () => {
    const key = ids.apiKeys.k6!.key; // no scopes
    for (let i = 0; i < 5; i++)
      expectEnvelope(await app.request("GET", "/public/v1/leads", { key }), 403, "PERMISSION_DENIED");
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
      for (let i = 0; i < 8; i++)
        statuses.push((await (i % 2 ? second : app).request("GET", "/public/v1/me", { key })).status);
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
describe.skipIf(!process.env.REDIS_URL && !process.env.REDIS_CLUSTER_NODES)(
  "what a request leaves in the Redis windows",
  () => {
    const windows = async (key: string) => {
      const [m, d] = redisQuotaKeys(app.quotaNamespace, hashKey(key));
      const redis = app.services.redis!;
      return {
        minute: await redis.get(m),
        day: await redis.get(d),
        minuteTtl: await redis.pttl(m),
        dayTtl: await redis.pttl(d),
      };
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
        // Right prefix, wrong secret
        const wrongSecret = ids.apiKeys.k6!.key.slice(0, -1) + (ids.apiKeys.k6!.key.endsWith("a") ? "b" : "a");
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
        for (let i = 0; i < 5; i++)
          statuses.push((await withLoad(() => app.request("GET", "/public/v1/me", { key }))).status);
        expect(statuses).toEqual([200, 200, 429, 429, 429]);
        const w = await windows(key);
        expect(w).toMatchObject({ minute: "5", day: "2" });
        expect(w.minuteTtl).toBeGreaterThan(50_000);
        expect(w.minuteTtl).toBeLessThanOrEqual(60_000);
        expect(w.dayTtl).toBeGreaterThan(86_300_000);
        expect(w.dayTtl).toBeLessThanOrEqual(86_400_000);
      });
    }
  },
);

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
    const hash = hashKey(`crm_${"m".repeat(12)}_${"n".repeat(40)}`);
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

// Quotas.admit(), the one decision the guard asks for (server/limits/quotas.ts), without HTTP: the
// rules, and the order of the key lookup and the count. `recordingRedis` stands for Redis: it runs the
// three quota scripts over a Map (INCR per window; a give-back at 0 deletes) and logs each call.
describe("Quotas.admit(): one decision per request", () => {
  const wellFormed = (c: string) => `crm_${c.repeat(12)}_${c.repeat(40)}`;
  function recordingRedis(log: string[]) {
    const store = new Map<string, number>();
    const incr = (k: string) => {
      const n = (store.get(k) ?? 0) + 1;
      store.set(k, n);
      return n;
    };
    const scripts: Record<string, (...a: any[]) => number[]> = {
      crmCountQuotas: (m: string, d: string) => [incr(m), 60_000, incr(d), 86_400_000],
      crmConsumeQuotas: (m: string, d: string, perMinute: string) => {
        const n = incr(m);
        return n > Number(perMinute) ? [n, 60_000] : [n, 60_000, incr(d), 86_400_000];
      },
      crmGiveBackQuotas: (_n: number, ...keys: string[]) =>
        keys.flatMap((k) => {
          const n = (store.get(k) ?? 0) - 1;
          if (n <= 0) {
            store.delete(k);
            return [0, -2];
          }
          store.set(k, n);
          return [n, 59_000];
        }),
    };
    const client = {
      store,
      // rate-limiter-flexible's read of a window (peek): GET and PTTL in one MULTI.
      multi() {
        let key = "";
        const chain = {
          get: (k: string) => {
            key = k;
            return chain;
          },
          pttl: () => chain,
          exec: async () => {
            log.push(`Read ${key}`);
            return store.has(key)
              ? [
                  [null, String(store.get(key))],
                  [null, 59_000],
                ]
              : [
                  [null, null],
                  [null, -2],
                ];
          },
        };
        return chain;
      },
      defineCommand(this: Record<string, unknown>, name: string) {
        this[name] = (...args: unknown[]) => {
          if (scripts[name])
            log.push(`${name.replace(/^crm|Quotas$/g, "")} ${args.filter((a) => typeof a === "string").join(" ")}`);
          return scripts[name] ? Promise.resolve(scripts[name]!(...args)) : Promise.reject(new Error("not scripted"));
        };
      },
    };
    return client;
  }
  /**
   * The guard's admission, with a lookup that logs when it starts
   * and answers, and resolves with `limits` (or throws `refusal`).
   */
  function admission(
    log: string[],
    o: {
      limits?: { perMinute: number; perDay: number };
      refusal?: unknown;
      inFlight?: number;
      gate?: Promise<void>;
    } = {},
  ) {
    const seen: Array<[string | undefined, string | undefined]> = [];
    return {
      seen,
      lookup: async (presented: string | undefined, keyHash: string | undefined) => {
        seen.push([presented, keyHash]);
        log.push("lookup");
        await o.gate;
        log.push("lookup answered");
        if (o.refusal !== undefined) throw o.refusal;
        return { keyHash: keyHash!, limits: o.limits ?? { perMinute: 2, perDay: 3 }, tag: "caller" };
      },
      anonymousPerMinute: 60,
      inFlight: () => o.inFlight ?? 1,
      now: () => new Date(),
    };
  }
  const ns = () => `rl-admit-${Math.random().toString(36).slice(2)}`;

  it("in process memory: admitted within both ceilings; 429 by the minute window, which the day window does not count; then 429 by the day window", async () => {
    const quotas = new Quotas(undefined, ns());
    const key = wellFormed("a");
    const hash = hashKey(key);
    const t0 = Math.floor(Date.now() / 1000) * 1000 + 250;
    vi.useFakeTimers({ toFake: ["Date"], now: t0 });
    try {
      const how = admission([], { limits: { perMinute: 2, perDay: 3 } });
      const admit = () => quotas.admit(key, hash, how);
      const first = await admit();
      expect(first).toEqual({
        admitted: true,
        caller: { keyHash: hash, limits: { perMinute: 2, perDay: 3 }, tag: "caller" },
        quota: {
          limit: 2,
          remaining: 1,
          reset: Math.ceil((t0 + 60_000) / 1000),
          windows: [
            { name: "minute", quota: 2, seconds: 60, used: 1, remaining: 1, resetIn: 60 },
            { name: "day", quota: 3, seconds: 86_400, used: 1, remaining: 2, resetIn: 86_400 },
          ],
        },
      });
      expect(how.seen).toEqual([[key, hash]]);
      expect(await admit()).toMatchObject({ admitted: true, quota: { remaining: 0 } });
      const minute = await admit();
      expect(minute).toMatchObject({
        admitted: false,
        caller: { tag: "caller" },
        quota: { limit: 2, remaining: 0, retryAfter: 60, window: "minute" },
      });
      const refusal = (minute as { refusal: AppError }).refusal;
      expect(refusal).toBeInstanceOf(AppError);
      expect(refusal).toMatchObject({ code: "RATE_LIMIT_EXCEEDED", status: 429, details: { retryAfter: 60 } });
      // A new minute: the day window holds 2 (the refused request
      // not counted there), so one more is admitted, at 0 left.
      vi.setSystemTime(t0 + 60_000);
      expect(await admit()).toMatchObject({ admitted: true, quota: { limit: 2, remaining: 0 } });
      const day = await admit();
      expect(day).toMatchObject({ admitted: false, quota: { remaining: 0, window: "day" } });
      expect(day.quota.retryAfter).toBe(86_400 - 60);
      expect(day.quota.reset).toBe(Math.ceil((t0 + 86_400_000) / 1000));
      expect((day as { refusal: AppError }).refusal).toMatchObject({
        code: "RATE_LIMIT_EXCEEDED",
        details: { retryAfter: 86_400 - 60 },
      });
      expect(how.seen).toHaveLength(5);
    } finally {
      vi.useRealTimers();
    }
  });

  it("a key that does not authenticate: refused with what the lookup threw, counted nowhere, the headers at the anonymous ceiling", async () => {
    for (const shared of [false, true]) {
      for (const inFlight of [1, 5]) {
        const redis = shared ? recordingRedis([]) : undefined;
        const quotas = new Quotas(redis as any, ns());
        const key = wellFormed("b");
        const hash = hashKey(key);
        const thrown = new AppError("INVALID_CREDENTIALS", "Invalid API key");
        for (let i = 0; i < 3; i++) {
          const d = await quotas.admit(key, hash, admission([], { refusal: thrown, inFlight }));
          expect(d).toEqual({
            admitted: false,
            refusal: thrown,
            quota: {
              limit: 60,
              remaining: 60,
              reset: expect.any(Number),
              windows: [
                { name: "minute", quota: 60, seconds: 60, used: 0, remaining: 60, resetIn: expect.any(Number) },
              ],
            },
          });
        }
        if (redis) expect(redis.store.size).toBe(0);
        // Nothing was counted: the key's first admitted request has its ceiling less one left.
        expect(await quotas.admit(key, hash, admission([], { inFlight }))).toMatchObject({
          admitted: true,
          quota: { remaining: 1 },
        });
        const outage = new Error("connection terminated");
        expect(await quotas.admit(key, hash, admission([], { refusal: outage, inFlight }))).toMatchObject({
          admitted: false,
          refusal: outage,
          quota: { limit: 60, remaining: 59 },
        });
      }
    }
  });

  it("Redis: an idle instance sends the count before the lookup answers, a busy one after it; a malformed key is not counted", async () => {
    const log: string[] = [];
    const redis = recordingRedis(log);
    const quotas = new Quotas(redis as any, "rl");
    const key = wellFormed("c");
    const hash = hashKey(key);
    const [m, d] = redisQuotaKeys("rl", hash);
    for (const inFlight of [1, 2]) {
      log.length = 0;
      let open!: () => void;
      const gate = new Promise<void>((r) => (open = r));
      const pending = quotas.admit(
        key,
        hash,
        admission(log, { inFlight, gate, limits: { perMinute: 10, perDay: 100 } }),
      );
      await new Promise((r) => setImmediate(r));
      expect(log).toEqual(inFlight === 1 ? [`Count ${m} ${d}`, "lookup"] : ["lookup"]);
      open();
      expect(await pending).toMatchObject({ admitted: true, quota: { remaining: inFlight === 1 ? 9 : 8 } });
      expect(log).toEqual(
        inFlight === 1
          ? [`Count ${m} ${d}`, "lookup", "lookup answered"]
          : ["lookup", "lookup answered", `Consume ${m} ${d} 10`],
      );
    }
    expect(redis.store).toEqual(
      new Map([
        [m, 2],
        [d, 2],
      ]),
    );
    log.length = 0;
    const malformed = await quotas.admit(
      "crm_short",
      undefined,
      admission(log, { refusal: new AppError("INVALID_CREDENTIALS", "Invalid API key") }),
    );
    expect(malformed).toMatchObject({ admitted: false, quota: { limit: 60, remaining: 60 } });
    expect(log).toEqual(["lookup", "lookup answered"]);
  });

  it("Redis, idle: a key that fails gets its early count back in both windows; over the minute ceiling, the day window gives it back", async () => {
    const log: string[] = [];
    const redis = recordingRedis(log);
    const quotas = new Quotas(redis as any, "rl");
    const key = wellFormed("e");
    const hash = hashKey(key);
    const [m, d] = redisQuotaKeys("rl", hash);
    const refused = await quotas.admit(
      key,
      hash,
      admission(log, { refusal: new AppError("PLAN_NOT_ELIGIBLE", "no API access") }),
    );
    expect(refused).toMatchObject({ admitted: false, quota: { limit: 60, remaining: 60 } });
    expect(log).toEqual([`Count ${m} ${d}`, "lookup", "lookup answered", `GiveBack ${m} ${d}`]);
    expect(redis.store.size).toBe(0);
    const statuses: Array<boolean | string> = [];
    for (let i = 0; i < 3; i++) {
      const dec = await quotas.admit(key, hash, admission(log, { limits: { perMinute: 1, perDay: 10 } }));
      statuses.push(dec.admitted || dec.quota.window!);
    }
    expect(statuses).toEqual([true, "minute", "minute"]);
    expect(log.filter((l) => l.startsWith("GiveBack")).slice(1)).toEqual([`GiveBack ${d}`, `GiveBack ${d}`]);
    expect(redis.store).toEqual(
      new Map([
        [m, 3],
        [d, 1],
      ]),
    );
  });

  it("Redis not answering: admit() counts in process memory, and gives back there, on both paths", async () => {
    const failing = {
      defineCommand(this: Record<string, unknown>, name: string) {
        this[name] = () => Promise.reject(new Error("connection refused"));
      },
    };
    for (const inFlight of [1, 5]) {
      const quotas = new Quotas(failing as any, ns());
      const key = wellFormed("f");
      const hash = hashKey(key);
      expect(
        await quotas.admit(
          key,
          hash,
          admission([], { refusal: new AppError("INVALID_CREDENTIALS", "Invalid API key"), inFlight }),
        ),
      ).toMatchObject({
        admitted: false,
        quota: { remaining: 60 },
      });
      const before = quotas.fallbackCount;
      expect(await quotas.admit(key, hash, admission([], { inFlight }))).toMatchObject({
        admitted: true,
        quota: { remaining: 1 },
      });
      expect(await quotas.admit(key, hash, admission([], { inFlight }))).toMatchObject({
        admitted: true,
        quota: { remaining: 0 },
      });
      expect(await quotas.admit(key, hash, admission([], { inFlight }))).toMatchObject({
        admitted: false,
        quota: { window: "minute" },
      });
      expect(quotas.fallback).toBe(true);
      expect(quotas.fallbackCount - before).toBe(3);
    }
  });
});
