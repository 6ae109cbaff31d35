// The front door and the request log (server/app.ts): GET / names the reference and the document;
// any other path outside /public/v1 is a JSON 404 in the API's envelope (never Express's HTML page).
// Every request's log line: a refused or failed one carries its envelope's `error` code, a 5xx is at
// error level, a 429 at warn, the rest at info; no raw key in any of them.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { expectEnvelope, startApp, type TestApp } from "../helpers/app.js";
import { fixture, tenant } from "../helpers/fixtures.js";

/** The log lines the apps of this file write. */
const lines: string[] = [];
const capture = { write: (line: string) => lines.push(line) };
let app: TestApp;
let key: string;
beforeAll(async () => {
  app = await startApp({ config: { logLevel: "info", logFormat: "json" }, logDestination: capture });
  key = (await app.load(fixture(tenant("acme")))).tenants.acme!.apiKeys.full!.key;
});
afterAll(() => app?.close());

describe("the front door", () => {
  it("GET / answers JSON naming /docs and /public/v1/openapi.json", async () => {
    const r = await app.request("GET", "/");
    expect(r.status).toBe(200);
    expect(r.headers.get("content-type")).toMatch(/^application\/json/);
    expect(r.body).toMatchObject({ docs: "/docs", openapi: "/public/v1/openapi.json", api: "/public/v1" });
    expect((await app.request("GET", r.body.docs)).status).toBe(200);
    expect((await app.request("GET", r.body.openapi)).status).toBe(200);
  });

  it("unknown paths outside /public/v1 are a JSON 404 envelope; /openapi.json says where the document is", async () => {
    for (const path of ["/openapi.json", "/nope", "/public", "/docs/nope/x", "/favicon.ico"]) {
      const r = await app.request("GET", path);
      expectEnvelope(r, 404, "NOT_FOUND");
      expect(r.text).not.toMatch(/<html|Cannot GET/i);
    }
    expect((await app.request("GET", "/openapi.json")).body.message).toContain("/public/v1/openapi.json");
    expectEnvelope(await app.request("POST", "/", { body: {} }), 404, "NOT_FOUND");
  });
});

describe("the request log", () => {
  /** The log records written while `fn` runs. */
  async function logged(fn: () => Promise<unknown>): Promise<Record<string, unknown>[]> {
    const from = lines.length;
    await fn();
    return lines
      .slice(from)
      .join("")
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  }
  const requestLine = (records: Record<string, unknown>[], path: string) =>
    records.find((r) => r.msg === "request" && r.path === path);

  it("2xx at info without a code; 4xx at info with its code; 429 at warn; 5xx at error; no raw key anywhere", async () => {
    const records = await logged(async () => {
      await app.request("GET", "/public/v1/me", { key });
      await app.request("POST", "/public/v1/leads", { key, body: { customerName: "" } });
      await app.request("GET", "/public/v1/leads", { key: "crm_not_a_key" });
      await app.request("GET", "/public/v1/nothing-here", { key });
    });
    expect(requestLine(records, "/public/v1/me")).toMatchObject({ level: 30, status: 200 });
    expect(requestLine(records, "/public/v1/me")).not.toHaveProperty("error");
    expect(
      records.find((r) => r.msg === "request" && r.path === "/public/v1/leads" && r.method === "POST"),
    ).toMatchObject({ level: 30, status: 422, error: "VALIDATION_ERROR" });
    expect(
      records.find((r) => r.msg === "request" && r.path === "/public/v1/leads" && r.method === "GET"),
    ).toMatchObject({ level: 30, status: 401, error: "INVALID_CREDENTIALS" });
    expect(requestLine(records, "/public/v1/nothing-here")).toMatchObject({
      level: 30,
      status: 404,
      error: "NOT_FOUND",
    });
    const text = JSON.stringify(records);
    expect(text).not.toContain(key);
    expect(text).not.toContain("crm_not_a_key");
  });

  it("a 429 is a warning with RATE_LIMIT_EXCEEDED; a 5xx an error with its code", async () => {
    const limited = await startApp({ config: { logLevel: "info", logFormat: "json" }, logDestination: capture });
    try {
      const ids = await limited.load(fixture(tenant("tiny", { rateLimit: { perMinute: 1, perDay: 100 } })));
      const k = ids.tenants.tiny!.apiKeys.full!.key;
      const records = await logged(async () => {
        await limited.request("GET", "/public/v1/me", { key: k });
        await limited.request("GET", "/public/v1/leads", { key: k });
        await limited.db.close(); // the database gone: the next request fails on it
        await limited.request("GET", "/public/v1/tickets", { key: k });
      });
      expect(requestLine(records, "/public/v1/leads")).toMatchObject({
        level: 40,
        status: 429,
        error: "RATE_LIMIT_EXCEEDED",
      });
      const failed = requestLine(records, "/public/v1/tickets")!;
      expect(failed.status as number).toBeGreaterThanOrEqual(500);
      expect(failed).toMatchObject({ level: 50, error: expect.stringMatching(/^[A-Z_]+$/) });
    } finally {
      await limited.close().catch(() => {});
    }
  });
});
