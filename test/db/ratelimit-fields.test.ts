// The IETF quota fields (RateLimit-Policy, RateLimit; draft-ietf-httpapi-ratelimit-headers) on every
// kind of answer — 200, 401 (no key, an unknown key), 403 (plan), 429 (minute, day), /trpc — each
// agreeing with the contract's X-RateLimit-* of the same answer, and GET /me's use of both windows.
// @topology redis
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LoadResult } from "../../server/admin/fixture.js";
import { expectEnvelope, startApp, type Response, type TestApp } from "../helpers/app.js";
import { fixture, tenant } from "../helpers/fixtures.js";

let app: TestApp;
let ids: LoadResult;
const key = (t: string, k = "full") => ids.tenants[t]!.apiKeys[k]!.key;

beforeAll(async () => {
  app = await startApp();
  ids = await app.load(
    fixture(
      tenant("roomy", { rateLimit: { perMinute: 50, perDay: 1000 } }),
      tenant("minutely", { rateLimit: { perMinute: 2, perDay: 1000 } }),
      tenant("daily", { rateLimit: { perMinute: 100, perDay: 3 } }),
      tenant("basic", { plan: "starter" }),
    ),
  );
}, 60_000);
afterAll(() => app?.close());

interface Field {
  name: string;
  params: Record<string, number>;
}

/** A structured-field list of `"name";k=v;…` items, as the draft writes them (strict: anything else fails). */
function parse(value: string | null): Field[] {
  expect(value).toBeTypeOf("string");
  return value!.split(", ").map((item) => {
    const m = /^"(minute|day)"((?:;[a-z]+=\d+)+)$/.exec(item);
    expect(m, `${JSON.stringify(item)} in ${JSON.stringify(value)}`).not.toBeNull();
    const params = Object.fromEntries(
      m![2]!
        .slice(1)
        .split(";")
        .map((p) => p.split("="))
        .map(([k, v]) => [k!, Number(v)]),
    );
    return { name: m![1]!, params };
  });
}

function fields(r: Response) {
  const policy = parse(r.headers.get("ratelimit-policy"));
  const state = parse(r.headers.get("ratelimit"));
  return { policy, state, x: (h: string) => Number(r.headers.get(`x-ratelimit-${h}`)) };
}

describe("RateLimit-Policy and RateLimit", () => {
  it("a 200 names both windows of the key; X-RateLimit-Remaining is the smaller of the two", async () => {
    const r = await app.request("GET", "/public/v1/me", { key: key("roomy") });
    expect(r.status).toBe(200);
    const { policy, state, x } = fields(r);
    expect(policy).toEqual([
      { name: "minute", params: { q: 50, w: 60 } },
      { name: "day", params: { q: 1000, w: 86400 } },
    ]);
    expect(state.map((s) => s.name)).toEqual(["minute", "day"]);
    const [m, d] = state.map((s) => s.params);
    expect(x("limit")).toBe(50);
    expect(x("remaining")).toBe(Math.min(m!.r!, d!.r!));
    expect(m!.t).toBeGreaterThanOrEqual(0);
    expect(m!.t).toBeLessThanOrEqual(60);
    expect(d!.t).toBeLessThanOrEqual(86400);
    expect(d!.t).toBeGreaterThanOrEqual(m!.t! - 1);
    // X-RateLimit-Reset (the minute window) and RateLimit's t describe the same moment.
    expect(Math.abs(x("reset") - (Math.floor(Date.now() / 1000) + m!.t!))).toBeLessThanOrEqual(2);
  });

  it("an answer without a valid key (no key, an unknown key) and a 403 plan describe the anonymous minute", async () => {
    const answers = [
      [await app.request("GET", "/public/v1/me"), 401, "INVALID_CREDENTIALS"],
      [
        await app.request("GET", "/public/v1/me", { key: "crm_live_nosuchkey0000000000000000" }),
        401,
        "INVALID_CREDENTIALS",
      ],
      [await app.request("GET", "/public/v1/me", { key: key("basic") }), 403, "PLAN_NOT_ELIGIBLE"],
    ] as const;
    for (const [r, status, code] of answers) {
      expectEnvelope(r, status, code);
      const { policy, state, x } = fields(r);
      expect(policy).toEqual([{ name: "minute", params: { q: x("limit"), w: 60 } }]);
      expect(state).toHaveLength(1);
      expect(state[0]!.params.r).toBe(x("remaining"));
    }
  });

  it("a 429 over the minute: its window at r=0 with Retry-After's wait; the day's ceiling still in the policy", async () => {
    const k = key("minutely");
    let r: Response | undefined;
    for (let i = 0; i < 3; i++) r = await app.request("GET", "/public/v1/me", { key: k });
    expectEnvelope(r!, 429, "RATE_LIMIT_EXCEEDED");
    const { policy, state } = fields(r!);
    expect(policy.map((p) => p.name)).toEqual(["minute", "day"]);
    expect(state).toEqual([{ name: "minute", params: { r: 0, t: expect.any(Number) } }]);
    expect(Math.abs(state[0]!.params.t! - Number(r!.headers.get("retry-after")))).toBeLessThanOrEqual(1);
  });

  it("a 429 over the day: the day at r=0, its reset as X-RateLimit-Reset says", async () => {
    const k = key("daily");
    let r: Response | undefined;
    for (let i = 0; i < 4; i++) r = await app.request("GET", "/public/v1/me", { key: k });
    expectEnvelope(r!, 429, "RATE_LIMIT_EXCEEDED");
    const { state, x } = fields(r!);
    const day = state.find((s) => s.name === "day")!;
    expect(day.params.r).toBe(0);
    expect(Math.abs(x("reset") - (Math.floor(Date.now() / 1000) + day.params.t!))).toBeLessThanOrEqual(2);
  });

  it("/trpc answers carry them too", async () => {
    const r = await fetch(`${app.url}/trpc/me.get`, { headers: { "X-API-Key": key("roomy") } });
    expect(r.status).toBe(200);
    expect(r.headers.get("ratelimit-policy")).toBe('"minute";q=50;w=60, "day";q=1000;w=86400');
    expect(r.headers.get("ratelimit")).toMatch(/^"minute";r=\d+;t=\d+, "day";r=\d+;t=\d+$/);
  });
});

describe("GET /me's use of both windows", () => {
  it("used, remaining and the reset time of each window, this request counted", async () => {
    const k = key("roomy", "bobkey");
    const first = await app.request("GET", "/public/v1/me", { key: k });
    const second = await app.request("GET", "/public/v1/me", { key: k });
    for (const [r, used] of [
      [first, 1],
      [second, 2],
    ] as const) {
      expect(r.status).toBe(200);
      const u = r.body.usage;
      expect(u.minute).toEqual({ used, remaining: 50 - used, resetAt: expect.any(String) });
      expect(u.day).toEqual({ used, remaining: 1000 - used, resetAt: expect.any(String) });
      const minuteLeft = Date.parse(u.minute.resetAt) - Date.now();
      expect(minuteLeft).toBeGreaterThan(0);
      expect(minuteLeft).toBeLessThanOrEqual(61_000);
      expect(Date.parse(u.day.resetAt) - Date.now()).toBeLessThanOrEqual(86_401_000);
      // The same numbers as the answer's own fields.
      const { state } = fields(r);
      expect(state.map((s) => s.params.r)).toEqual([u.minute.remaining, u.day.remaining]);
    }
  });
});
