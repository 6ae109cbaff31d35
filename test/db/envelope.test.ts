// One error envelope for everything under /public/v1 (spec "Errors").
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { toAppError, AppError } from "../../server/errors.js";
import { expectEnvelope, randomUuid, startApp, type TestApp } from "../helpers/app.js";
import { fixture, tenant } from "../helpers/fixtures.js";

let app: TestApp;
let key: string;
beforeAll(async () => {
  app = await startApp({ config: { bodyLimitBytes: 4096 } });
  const ids = await app.load(fixture(tenant("acme")));
  key = ids.tenants.acme!.apiKeys.full!.key;
});
afterAll(() => app.close());

const leads = () => app.db.prisma.lead.count();

describe("error envelope", () => {
  it("malformed JSON → 422 VALIDATION_ERROR, nothing persisted", async () => {
    const before = await leads();
    const r = await app.request("POST", "/public/v1/leads", {
      key,
      raw: '{"customerName": "x",',
      headers: { "Content-Type": "application/json" },
    });
    expectEnvelope(r, 422, "VALIDATION_ERROR");
    expect(await leads()).toBe(before);
  });
  it("a body that is not an object → 422", async () => {
    for (const raw of ["[]", '"text"', "42", "null", ""]) {
      const r = await app.request("POST", "/public/v1/leads", {
        key,
        raw,
        headers: { "Content-Type": "application/json" },
      });
      expectEnvelope(r, 422, "VALIDATION_ERROR");
    }
  });
  it("missing or wrong Content-Type on a write → 422", async () => {
    const body = JSON.stringify({ customerName: "x" });
    expectEnvelope(
      await app.request("POST", "/public/v1/leads", { key, raw: body, headers: { "Content-Type": "text/plain" } }),
      422,
      "VALIDATION_ERROR",
    );
    expectEnvelope(
      await app.request("POST", "/public/v1/leads", {
        key,
        raw: body,
        headers: { "Content-Type": "application/x-www-form-urlencoded" },
      }),
      422,
      "VALIDATION_ERROR",
    );
    const none = await fetch(`${app.url}/public/v1/leads`, {
      method: "POST",
      headers: { "X-API-Key": key },
      body: new Uint8Array(Buffer.from(body)),
    });
    expect(none.status).toBe(422);
  });
  it("application/json with a charset is fine", async () => {
    const r = await app.request("POST", "/public/v1/leads", {
      key,
      raw: JSON.stringify({ customerName: "Charset" }),
      headers: { "Content-Type": "application/json; charset=utf-8" },
    });
    expect(r.status).toBe(201);
  });
  it("unknown fields → 422 with the field named in details", async () => {
    const r = await app.request("POST", "/public/v1/leads", { key, body: { customerName: "x", bogus: 1 } });
    const b = expectEnvelope(r, 422, "VALIDATION_ERROR");
    expect(JSON.stringify(b.details)).toContain("bogus");
  });
  it("wrong types and failing fields are listed in details.fields", async () => {
    const r = await app.request("POST", "/public/v1/leads", { key, body: { customerName: 5, rooms: 1.5 } });
    const b = expectEnvelope(r, 422, "VALIDATION_ERROR");
    const fields = (b.details.fields as { field: string }[]).map((f) => f.field);
    expect(fields).toEqual(expect.arrayContaining(["customerName", "rooms"]));
  });
  it("malformed UUID in a path → 422; unknown UUID → 404", async () => {
    expectEnvelope(await app.request("GET", "/public/v1/leads/not-a-uuid", { key }), 422, "VALIDATION_ERROR");
    expectEnvelope(await app.request("GET", `/public/v1/leads/${randomUuid()}`, { key }), 404, "NOT_FOUND");
  });
  it("malformed UUID in a filter → 422; unknown UUID in a filter → empty list", async () => {
    expectEnvelope(
      await app.request("GET", "/public/v1/leads", { key, query: { customerId: "nope" } }),
      422,
      "VALIDATION_ERROR",
    );
    const r = await app.request("GET", "/public/v1/leads", { key, query: { customerId: randomUuid() } });
    expect(r.status).toBe(200);
    expect(r.body.items).toEqual([]);
  });
  it("offset/limit bounds and integers", async () => {
    for (const q of [{ limit: "0" }, { limit: "201" }, { limit: "1.5" }, { limit: "abc" }, { offset: "-1" }])
      expectEnvelope(await app.request("GET", "/public/v1/leads", { key, query: q }), 422, "VALIDATION_ERROR");
    for (const q of [{ limit: "1" }, { limit: "200" }, { offset: "0" }, { unknownParam: "x" }])
      expect((await app.request("GET", "/public/v1/leads", { key, query: q })).status).toBe(200);
  });
  it("unknown paths and methods under /public/v1 → 404 NOT_FOUND", async () => {
    expectEnvelope(await app.request("GET", "/public/v1/nothing", { key }), 404, "NOT_FOUND");
    expectEnvelope(await app.request("DELETE", `/public/v1/leads/${randomUuid()}`, { key }), 404, "NOT_FOUND");
    expectEnvelope(await app.request("PUT", "/public/v1/leads", { key, body: {} }), 404, "NOT_FOUND");
  });
  it("the prefix itself, in any letter case, with or without a slash, is under the API: 404 envelope with a key, 401 without (not a bare HTML page)", async () => {
    for (const path of ["/public/v1", "/public/v1/", "/PUBLIC/V1", "/Public/v1/?x=1"]) {
      const r = await app.request("GET", path, { key });
      expectEnvelope(r, 404, "NOT_FOUND");
      expect(r.headers.get("content-type")).toBe("application/json; charset=utf-8");
      expectEnvelope(await app.request("GET", path), 401, "INVALID_CREDENTIALS");
    }
    const head = await app.request("HEAD", "/public/v1/openapi.json");
    expect(head.status).toBe(200);
    expect(head.text).toBe("");
    const doc = await app.request("GET", "/PUBLIC/V1/OPENAPI.JSON/");
    expect(doc.status).toBe(200);
    expect(doc.body.openapi).toBe("3.1.0");
    // Not the public API: other paths that merely start with its letters are the front door's 404
    // (no key asked for: without one it is still 404, not the API's 401).
    for (const k of [key, undefined]) {
      const other = expectEnvelope(await app.request("GET", "/public/v1x", { key: k }), 404, "NOT_FOUND");
      expect(other.message).toContain("the API is under /public/v1");
    }
  });
  it("bodies over the limit → 413 with the envelope", async () => {
    const r = await app.request("POST", "/public/v1/leads", {
      key,
      body: { customerName: "x", notes: "n".repeat(10_000) },
    });
    expectEnvelope(r, 413, "PAYLOAD_TOO_LARGE");
  });
  it("request ids: generated, echoed in X-Request-Id, or taken from a sane client header", async () => {
    const a = await app.request("GET", "/public/v1/nothing", { key });
    expect(a.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    const b = await app.request("GET", "/public/v1/nothing", { key, headers: { "X-Request-Id": "client-req-42" } });
    expect(b.body.request_id).toBe("client-req-42");
    const c = await app.request("GET", "/public/v1/nothing", {
      key,
      headers: { "X-Request-Id": "bad id with spaces" },
    });
    expect(c.body.request_id).not.toBe("bad id with spaces");
  });
  it("unexpected failures become 500 INTERNAL_ERROR without internals", () => {
    const e = toAppError(new Error('relation "secret_table" does not exist at /srv/app.ts:12'));
    expect(e).toBeInstanceOf(AppError);
    expect(e.status).toBe(500);
    expect(e.code).toBe("INTERNAL_ERROR");
    expect(e.message).not.toContain("secret_table");
    expect(e.details).toEqual({});
  });
  it("database unreachable becomes 503 SERVICE_UNAVAILABLE", () => {
    const err = Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { code: "ECONNREFUSED" });
    expect(toAppError(err).code).toBe("SERVICE_UNAVAILABLE");
  });
  it("a restarted or lost PostgreSQL connection becomes 503, however Prisma wraps it", () => {
    // What a fast shutdown does to a query in flight, as Prisma 7 + adapter-pg report it.
    const adapter = Object.assign(new Error("terminating connection due to administrator command"), {
      name: "DriverAdapterError",
      cause: {
        kind: "postgres",
        code: "57P01",
        originalCode: "57P01",
        originalMessage: "terminating connection due to administrator command",
      },
    });
    const prisma = Object.assign(new Error("Database error. Code: `57P01`."), {
      code: "P2039",
      meta: { driverAdapterError: adapter },
    });
    expect(toAppError(prisma).code).toBe("SERVICE_UNAVAILABLE");
    const closed = Object.assign(new Error("x"), {
      code: "P2010",
      meta: { driverAdapterError: { name: "DriverAdapterError", cause: { kind: "ConnectionClosed" } } },
    });
    expect(toAppError(closed).code).toBe("SERVICE_UNAVAILABLE");
    expect(toAppError(Object.assign(new Error("the database system is starting up"), { code: "57P03" })).code).toBe(
      "SERVICE_UNAVAILABLE",
    );
  });
  it("NUL (U+0000) in a body string or a searched query value → 422, nothing persisted", async () => {
    const before = await leads();
    const r = await app.request("POST", "/public/v1/leads", { key, body: { customerName: "a\u0000b" } });
    const b = expectEnvelope(r, 422, "VALIDATION_ERROR");
    expect(JSON.stringify(b.details)).toContain("customerName");
    expect(await leads()).toBe(before);
    expectEnvelope(
      await app.request("GET", "/public/v1/contacts", { key, query: { search: "a\u0000" } }),
      422,
      "VALIDATION_ERROR",
    );
    expect((await app.request("GET", "/public/v1/leads", { key, query: { ignored: "\u0000" } })).status).toBe(200);
  });
  it("health endpoints need no key and are not rate-limited", async () => {
    const h = await fetch(`${app.url}/healthz`);
    expect(h.status).toBe(200);
    expect(h.headers.get("x-ratelimit-limit")).toBeNull();
    const r = await fetch(`${app.url}/readyz`);
    expect(r.status).toBe(200);
    expect(await r.json()).toMatchObject({ status: "ok" });
  });
});
