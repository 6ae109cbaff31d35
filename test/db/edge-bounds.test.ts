// Bounds sized to the operation and the answers' edges: the body member cap of the batch upserts (a
// full 100-lead batch fits, a bound remains, other routes keep theirs), every query parameter read
// (none dropped after the 1,000th), echoed names cut, absolute-form targets made origin-form before
// routing, logging and the PUT's checks, the negative cache of unknown key prefixes (no lookup, the
// answers unchanged; revoked and starter keys still looked up), the cache headers of every /public/v1
// and /trpc answer, a /readyz 503's log line, and the external ids "." and "..".
import { request as httpRequest, type IncomingHttpHeaders } from "node:http";
import { createServer, type AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createKey, revokeKey, setPlan } from "../../server/admin/operations.js";
import { isKeyLookup } from "../../server/auth/authenticate.js";
import { MAX_BATCH_JSON_MEMBERS, MAX_JSON_MEMBERS } from "../../server/body.js";
import { MAX_ECHOED_NAME } from "../../server/errors.js";
import { API_CACHE_HEADERS } from "../../server/http.js";
import { expectEnvelope, freshDatabase, startApp, type TestApp } from "../helpers/app.js";
import { fixture, tenant } from "../helpers/fixtures.js";

type Ids = Awaited<ReturnType<TestApp["load"]>>["tenants"][string];

let app: TestApp;
let acme: Ids;
const statements: string[] = [];
const logLines: Record<string, any>[] = [];
const lookups = () => statements.filter(isKeyLookup).length;
const ANONYMOUS_PER_MINUTE = 4;

beforeAll(async () => {
  app = await startApp({
    db: await freshDatabase({ observe: (sql) => void statements.push(sql) }),
    config: { logLevel: "info", logFormat: "json", anonymousPerMinute: ANONYMOUS_PER_MINUTE },
    logDestination: { write: (line: string) => void logLines.push(JSON.parse(line)) },
  });
  acme = (await app.load(fixture(tenant("acme")))).tenants.acme!;
}, 120_000);
afterAll(() => app?.close());

const KEY = () => acme.apiKeys.full!.key;
const leadsWith = async (externalIds: string[]) =>
  app.db.prisma.lead.count({ where: { tenantId: acme.id, externalId: { in: externalIds } } });

/** A lead item with every field of the PUT body set (15 members, a budget and four zones included). */
const fullLead = (externalId: string, i: number) => ({
  externalId,
  conversationId: null,
  customerName: `Full Lead ${i}`,
  customerEmail: `full-${externalId}@example.test`,
  customerPhone: `+346${String(10_000_000 + i).slice(-8)}`,
  intent: "buy",
  quality: "hot",
  stageId: acme.stages.new,
  budget: { min: 100_000 + i, max: 250_000 + i },
  zones: ["Centro", "Chamberí", "Salamanca", "Retiro"],
  rooms: 3,
  assignedOperatorId: acme.users.ana,
  notes: "Wants a terrace",
});

/** A raw HTTP request with the request target exactly as given (an absolute-form one included). */
function rawRequest(method: string, target: string, headers: Record<string, string> = {}, body?: string) {
  const u = new URL(app.url);
  return new Promise<{ status: number; headers: IncomingHttpHeaders; text: string }>((resolve, reject) => {
    const req = httpRequest({ host: u.hostname, port: u.port, method, path: target, headers }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => (text += c));
      res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, text }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

const trpcPost = (proc: string, input: unknown, key: string | undefined = KEY()) =>
  fetch(`${app.url}/trpc/${proc}`, {
    method: "POST",
    headers: { "Content-Type": "application/json", ...(key ? { "X-API-Key": key } : {}) },
    body: JSON.stringify(input),
  });

describe("the body member cap scales with the batch routes", () => {
  it("a full 100-lead batch fits, over REST and /trpc; past MAX_BATCH_JSON_MEMBERS it is refused whole", async () => {
    const rest = Array.from({ length: 100 }, (_, i) => fullLead(`full-rest-${i}`, i));
    const members = (JSON.stringify({ items: rest }).match(/":/g) ?? []).length;
    expect(members).toBeGreaterThan(MAX_JSON_MEMBERS); // 1,501: refused before, as "more than 1000 fields"
    const r = await app.request("POST", "/public/v1/leads/batch/upsert", { key: KEY(), body: { items: rest } });
    expect(r.status, r.text.slice(0, 500)).toBe(200);
    expect(r.body.results.map((x: any) => x.status)).toEqual(Array(100).fill("created"));
    expect(await leadsWith(rest.map((l) => l.externalId))).toBe(100);

    const viaTrpc = Array.from({ length: 100 }, (_, i) => fullLead(`full-trpc-${i}`, 100 + i));
    const t = await trpcPost("leads.batchUpsert", { items: viaTrpc });
    const tb = (await t.json()) as any;
    expect(t.status, JSON.stringify(tb).slice(0, 500)).toBe(200);
    expect(tb.result.data.results.map((x: any) => x.status)).toEqual(Array(100).fill("created"));

    // 100 items of 50 members, plus "items": 5,001 members. Refused from the text, nothing written.
    const over = Array.from({ length: 100 }, (_, i) => ({
      externalId: `over-${i}`,
      customerName: "x",
      ...Object.fromEntries(Array.from({ length: 48 }, (_, k) => [`k${k}`, k])),
    }));
    const tooMany = `at most ${MAX_BATCH_JSON_MEMBERS} object members in all`;
    for (const send of [
      () => app.request("POST", "/public/v1/leads/batch/upsert", { key: KEY(), body: { items: over } }),
      async () => {
        const res = await trpcPost("leads.batchUpsert", { items: over });
        const body = (await res.json()) as any;
        return { status: res.status, body: body.error.data.envelope };
      },
    ]) {
      const refused = await send();
      expect(refused.status).toBe(422);
      expect(refused.body).toMatchObject({
        error: "VALIDATION_ERROR",
        message: `Request body has more than ${MAX_BATCH_JSON_MEMBERS} fields`,
        details: { fields: [{ field: "(body)", code: "too_many_fields", message: tooMany }] },
      });
    }
    expect(await leadsWith(over.map((l) => l.externalId))).toBe(0);
  });

  it("other routes keep MAX_JSON_MEMBERS: a PUT and a create of 1,001 members are refused", async () => {
    const budget = Object.fromEntries(Array.from({ length: 999 }, (_, i) => [`k${i}`, i]));
    const message = `Request body has more than ${MAX_JSON_MEMBERS} fields`;
    const body = { customerName: "x", budget };
    const put = await app.request("PUT", "/public/v1/leads/by-external-id/cap-put", { key: KEY(), body });
    expect(expectEnvelope(put, 422, "VALIDATION_ERROR")).toMatchObject({ message });
    const create = await trpcPost("leads.create", { ...body, externalId: "cap-create" });
    expect(((await create.json()) as any).error.data.envelope.message).toBe(message);
    expect(await leadsWith(["cap-put", "cap-create"])).toBe(0);
  });
});

describe("the REST query parser reads every parameter", () => {
  it("1,000 padding parameters before externalId: the filter applies; a later repeated one is a 422", async () => {
    const padding = Array.from({ length: 1000 }, (_, i) => `p${i}=1`).join("&");
    const r = await app.request("GET", `/public/v1/leads?${padding}&externalId=full-rest-7`, { key: KEY() });
    expect(r.status).toBe(200);
    expect(r.body.items.map((l: any) => l.externalId)).toEqual(["full-rest-7"]);
    expect(r.body.pagination.totalItems).toBe(1);
    const repeated = await app.request("GET", `/public/v1/leads?${padding}&limit=1&limit=2`, { key: KEY() });
    expectEnvelope(repeated, 422, "VALIDATION_ERROR");
  });
});

describe("echoed names are cut to MAX_ECHOED_NAME", () => {
  it("a PUT with a 900,000-character unknown field: a small 422 naming the field's start", async () => {
    const name = `zz${"x".repeat(900_000)}`;
    const body = { customerName: "x", [name]: 1 };
    const r = await app.request("PUT", "/public/v1/leads/by-external-id/long-name", { key: KEY(), body });
    const b = expectEnvelope(r, 422, "VALIDATION_ERROR");
    expect(r.text.length).toBeLessThan(2_000);
    const field = `${name.slice(0, MAX_ECHOED_NAME - 1)}…`;
    expect(b.details.fields).toEqual([{ field, code: "unknown_field", message: "Unknown field" }]);
    expect(await leadsWith(["long-name"])).toBe(0);
    // /trpc: the envelope and tRPC's own message (the first field's reason) alike.
    const t = await trpcPost("leads.create", { customerName: "x", externalId: "long-name", [name]: 1 });
    const text = await t.text();
    expect(t.status).toBe(422);
    expect(text.length).toBeLessThan(3_000);
    expect(await leadsWith(["long-name"])).toBe(0);
  });

  it("a long query parameter name that is not UTF-8, a long unknown path: cut as well", async () => {
    const q = await app.request("GET", `/public/v1/leads?${"n".repeat(5_000)}%FF=1`, { key: KEY() });
    const field = expectEnvelope(q, 422, "VALIDATION_ERROR").details.fields[0].field as string;
    expect(field.length).toBe(MAX_ECHOED_NAME);
    expect(field.endsWith("…")).toBe(true);
    const p = await app.request("GET", `/public/v1/${"a".repeat(5_000)}`, { key: KEY() });
    expect(expectEnvelope(p, 404, "NOT_FOUND").message.length).toBeLessThan(300);
  });
});

describe("absolute-form request targets", () => {
  it("are routed, logged and checked as origin form: PUT answers Location; a body externalId is refused", async () => {
    const body = JSON.stringify({ customerName: "Absolute" });
    const headers = { "X-API-Key": KEY(), "Content-Type": "application/json", "X-Request-Id": "abs-form-1" };
    const r = await rawRequest("PUT", "http://other.example/public/v1/leads/by-external-id/abs-1", headers, body);
    expect(r.status, r.text).toBe(201);
    const created = JSON.parse(r.text);
    expect(r.headers.location).toBe(`/public/v1/leads/${created.id}`);
    const line = logLines.find((l) => l.reqId === "abs-form-1" && l.msg === "request");
    expect(line).toMatchObject({ method: "PUT", path: "/public/v1/leads/by-external-id/abs-1", status: 201 });
    expect(await leadsWith(["abs-1"])).toBe(1);

    // The PUT's REST-only rule: the path names the external id, the body may not (was 201 before).
    const named = JSON.stringify({ customerName: "Absolute", externalId: "abs-2" });
    const target = "HTTP://other.example:8080/public/v1/leads/by-external-id/abs-2";
    const refused = await rawRequest("PUT", target, headers, named);
    expect(refused.status).toBe(422);
    expect(JSON.parse(refused.text).error).toBe("VALIDATION_ERROR");
    expect(await leadsWith(["abs-2"])).toBe(0);
    // /trpc and the front door too.
    const me = await rawRequest("GET", "http://other.example/trpc/me.get", { "X-API-Key": KEY() });
    expect(me.status).toBe(200);
    expect((await rawRequest("GET", "https://x.example")).status).toBe(200);
  });
});

describe("failed authentication costs little: unknown key prefixes are remembered", () => {
  const madeUp = () => `crm_${Math.random().toString(36).slice(2, 14).padEnd(12, "Z")}_${"A".repeat(40)}`;
  const me = (key: string) => app.request("GET", "/public/v1/me", { key });

  it("an unknown prefix is looked up once, then refused without one: 401, anonymous headers, no 429", async () => {
    const key = madeUp();
    const before = lookups();
    for (let i = 0; i < ANONYMOUS_PER_MINUTE * 3; i++) {
      const r = await me(key);
      expectEnvelope(r, 401, "INVALID_CREDENTIALS");
      expect(r.headers.get("x-ratelimit-limit")).toBe(String(ANONYMOUS_PER_MINUTE));
      expect(r.headers.get("x-ratelimit-remaining")).toBe(String(ANONYMOUS_PER_MINUTE));
    }
    // /trpc shares the service's cache.
    expect((await fetch(`${app.url}/trpc/me.get`, { headers: { "X-API-Key": key } })).status).toBe(401);
    expect(lookups() - before).toBe(1);
    // Another made-up prefix: its own lookup.
    expectEnvelope(await me(madeUp()), 401, "INVALID_CREDENTIALS");
    expect(lookups() - before).toBe(2);
  });

  it("known prefixes are looked up every time: a wrong secret, a revoked key (at once), a starter key", async () => {
    const k = await createKey(app.db, acme.id, acme.users.ana!, "all");
    const wrongSecret = `${k.prefix}_${"B".repeat(40)}`;
    let before = lookups();
    for (let i = 0; i < 3; i++) expectEnvelope(await me(wrongSecret), 401, "INVALID_CREDENTIALS");
    expect(lookups() - before).toBe(3);
    expect((await me(k.key)).status).toBe(200);
    await revokeKey(app.db, k.id);
    before = lookups();
    for (let i = 0; i < 3; i++) expectEnvelope(await me(k.key), 401, "INVALID_CREDENTIALS");
    expect(lookups() - before).toBe(3);

    const other = (await app.load(fixture(tenant("starter")))).tenants.starter!;
    await setPlan(app.db, other.id, "starter");
    before = lookups();
    for (let i = 0; i < 3; i++) expectEnvelope(await me(other.apiKeys.full!.key), 403, "PLAN_NOT_ELIGIBLE");
    expect(lookups() - before).toBe(3);
    await setPlan(app.db, other.id, "pro");
    expect((await me(other.apiKeys.full!.key)).status).toBe(200);
  });
});

describe("cache and sniffing headers on every /public/v1 and /trpc answer", () => {
  const expectCacheHeaders = (h: Headers | IncomingHttpHeaders, what: string) => {
    const get = (n: string) => (h instanceof Headers ? h.get(n) : (h[n.toLowerCase()] as string | undefined));
    expect(get("cache-control"), what).toBe(API_CACHE_HEADERS["Cache-Control"]);
    expect(get("x-content-type-options"), what).toBe("nosniff");
    expect(get("vary") ?? "", what).toMatch(/(?:^|,\s*)X-API-Key(?:\s*,|$)/i);
  };

  it("successes, errors, 304 and the OpenAPI document over REST; ETag revalidation still works", async () => {
    const lead = await app.request("POST", "/public/v1/leads", { key: KEY(), body: { customerName: "Cache" } });
    expect(lead.status).toBe(201);
    const etag = lead.headers.get("etag")!;
    const answers: [string, Response | { headers: Headers; status: number }][] = [];
    const send = async (what: string, method: string, path: string, o: Parameters<TestApp["request"]>[2] = {}) => {
      const r = await app.request(method, path, o);
      answers.push([`${what} ${r.status}`, r]);
      return r;
    };
    expect((await send("get", "GET", `/public/v1/leads/${lead.body.id}`, { key: KEY() })).status).toBe(200);
    const revalidate = { key: KEY(), headers: { "If-None-Match": etag } };
    expect((await send("not modified", "GET", `/public/v1/leads/${lead.body.id}`, revalidate)).status).toBe(304);
    expect((await send("no key", "GET", "/public/v1/me")).status).toBe(401);
    expect((await send("invalid", "POST", "/public/v1/leads", { key: KEY(), body: {} })).status).toBe(422);
    const unknownId = "00000000-0000-4000-8000-000000000000";
    expect((await send("unknown", "GET", `/public/v1/leads/${unknownId}`, { key: KEY() })).status).toBe(404);
    expect((await send("no such path", "GET", "/public/v1/nothing-here", { key: KEY() })).status).toBe(404);
    expect((await send("document", "GET", "/public/v1/openapi.json")).status).toBe(200);
    expect((await send("document", "HEAD", "/public/v1/openapi.json")).status).toBe(200);
    const raw = `{"customerName":"${"x".repeat(1_100_000)}"}`;
    const headers = { "Content-Type": "application/json" };
    const tooLarge = await send("too large", "POST", "/public/v1/leads", { key: KEY(), raw, headers });
    expect(tooLarge.status).toBe(413);
    for (const [what, r] of answers) expectCacheHeaders(r.headers, what);
    // 304 only while the version is the one named.
    await app.request("PATCH", `/public/v1/leads/${lead.body.id}`, { key: KEY(), body: { notes: "changed" } });
    expect((await app.request("GET", `/public/v1/leads/${lead.body.id}`, revalidate)).status).toBe(200);
  });

  it("/trpc answers: a call, a batch, errors (401, 404, 422), HEAD", async () => {
    const h = { "X-API-Key": KEY() };
    const calls: [string, Response][] = [
      ["call", await fetch(`${app.url}/trpc/me.get`, { headers: h })],
      ["batch", await fetch(`${app.url}/trpc/me.get,leads.list?batch=1&input=%7B%7D`, { headers: h })],
      ["no key", await fetch(`${app.url}/trpc/me.get`)],
      ["no such procedure", await fetch(`${app.url}/trpc/nothing.here`, { headers: h })],
      ["invalid", await trpcPost("leads.create", {})],
      ["head", await fetch(`${app.url}/trpc/me.get`, { method: "HEAD", headers: h })],
    ];
    expect(calls.map(([w, r]) => `${w} ${r.status}`)).toEqual([
      "call 200",
      "batch 200",
      "no key 401",
      "no such procedure 404",
      "invalid 422",
      expect.stringMatching(/^head 2\d\d$/),
    ]);
    for (const [what, r] of calls) expectCacheHeaders(r.headers, what);
  });
});

describe('external ids "." and ".." are refused (a URL path cannot name them)', () => {
  it("create, batch item and list filter: 422 naming externalId, nothing written", async () => {
    const namingExternalId = expect.objectContaining({ field: "externalId" });
    for (const externalId of [".", ".."]) {
      const body = { customerName: "Dots", externalId };
      const r = await app.request("POST", "/public/v1/leads", { key: KEY(), body });
      expect(expectEnvelope(r, 422, "VALIDATION_ERROR").details.fields).toEqual([namingExternalId]);
    }
    const batch = await app.request("POST", "/public/v1/contacts/batch/upsert", {
      key: KEY(),
      body: {
        items: [
          { externalId: "..", phone: "+34611000111" },
          { externalId: "...", phone: "+34611000112" },
        ],
      },
    });
    expect(batch.status).toBe(200);
    expect(batch.body.results.map((x: any) => x.status)).toEqual(["failed", "created"]);
    const refusal = { error: "VALIDATION_ERROR", details: { fields: [namingExternalId] } };
    expect(batch.body.results[0].error).toMatchObject(refusal);
    const dots = { tenantId: acme.id, externalId: { in: [".", ".."] } };
    expect(await app.db.prisma.contact.count({ where: dots })).toBe(0);
    expect(await leadsWith([".", ".."])).toBe(0);
    const filtered = await app.request("GET", "/public/v1/leads", { key: KEY(), query: { externalId: "." } });
    expectEnvelope(filtered, 422, "VALIDATION_ERROR");
  });
});

describe("/readyz", () => {
  it("a 503 logs its cause", async () => {
    const lines: Record<string, any>[] = [];
    const closed = await new Promise<number>((resolve) => {
      const s = createServer().listen(0, "127.0.0.1", () => {
        const port = (s.address() as AddressInfo).port;
        s.close(() => resolve(port));
      });
    });
    const down = await startApp({
      db: await freshDatabase(),
      // Redis at a closed port (whatever the leg configures): its check fails, the database's does not.
      config: {
        logLevel: "info",
        logFormat: "json",
        redisUrl: `redis://127.0.0.1:${closed}`,
        redisClusterNodes: undefined,
      },
      redisReadyMs: 50,
      logDestination: { write: (line: string) => void lines.push(JSON.parse(line)) },
    });
    try {
      const r = await fetch(`${down.url}/readyz`, { headers: { "X-Request-Id": "ready-1" } });
      expect(r.status).toBe(503);
      expect(await r.json()).toEqual({ status: "unavailable", checks: { database: "ok", redis: "unavailable" } });
      const line = lines.find((l) => l.reqId === "ready-1" && l.level === 40 && l.msg.startsWith("not ready"));
      const checks = { database: "ok", redis: "unavailable" };
      expect(line).toMatchObject({ checks, causes: { redis: expect.any(String) } });
      expect(line!.causes.redis.length).toBeGreaterThan(0);
      expect(line!.msg).toBe(`not ready (503): redis: ${line!.causes.redis}`);
    } finally {
      await down.close();
    }
  });
});
