// The OpenAPI document: valid (swagger-parser), exact on the spec's operations, served without a key,
// committed file up to date; and the conformance hook itself can fail.
import { readFileSync } from "node:fs";
import SwaggerParser from "@apidevtools/swagger-parser";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { appRouter } from "../routers/index.js";
import { buildOpenApiDocument } from "../rest/openapi.js";
import { assertConforms, checked, documentedOperations } from "./helpers/conformance.js";
import { startApp, type TestApp } from "./helpers/app.js";
import { fixture, tenant } from "./helpers/fixtures.js";

const SPEC_OPERATIONS = [
  "GET /public/v1/me",
  "GET /public/v1/leads",
  "POST /public/v1/leads",
  "GET /public/v1/leads/{lead_id}",
  "PATCH /public/v1/leads/{lead_id}",
  "GET /public/v1/contacts",
  "POST /public/v1/contacts",
  "PATCH /public/v1/contacts/{contact_id}",
  "GET /public/v1/conversations",
  "POST /public/v1/conversations/start",
  "GET /public/v1/conversations/{id}/messages",
  "POST /public/v1/conversations/{id}/messages",
  "GET /public/v1/appointments",
  "POST /public/v1/appointments",
  "PATCH /public/v1/appointments/{appointment_id}",
  "GET /public/v1/availability",
  "GET /public/v1/tickets",
  "POST /public/v1/tickets",
  "PATCH /public/v1/tickets/{ticket_id}",
  "POST /public/v1/tickets/{ticket_id}/comments",
  // Additive (issue 15).
  "GET /public/v1/changes",
];

let app: TestApp;
let key: string;
beforeAll(async () => {
  app = await startApp();
  key = (await app.load(fixture(tenant("acme")))).tenants.acme!.apiKeys.full!.key;
});
afterAll(() => app.close());

const doc = () => JSON.parse(JSON.stringify(buildOpenApiDocument(appRouter)));

describe("OpenAPI document", () => {
  it("is a valid OpenAPI 3.1 document", async () => {
    await expect(SwaggerParser.validate(doc())).resolves.toBeTruthy();
  });
  it("has exactly the spec's 20 operations plus the changes feed, and no DELETE", () => {
    expect(documentedOperations().sort()).toEqual([...SPEC_OPERATIONS].sort());
  });
  it("every operation: X-API-Key security, scope in the description, envelope errors, rate-limit headers", () => {
    const d = doc();
    expect(d.components.securitySchemes.ApiKey).toEqual({ type: "apiKey", in: "header", name: "X-API-Key" });
    for (const [path, item] of Object.entries<any>(d.paths))
      for (const [method, op] of Object.entries<any>(item)) {
        expect(op.security).toEqual([{ ApiKey: [] }]);
        expect(op.description).toMatch(/Scope: /);
        for (const s of ["401", "403", "429"]) expect(op.responses[s], `${method} ${path} ${s}`).toBeDefined();
        expect(op.responses["429"].headers["Retry-After"]).toBeDefined();
        const success = Object.keys(op.responses).filter((s) => s.startsWith("2"));
        expect(success).toHaveLength(1);
        expect(success[0]).toBe(method === "post" ? "201" : "200");
        const hasIdem = (op.parameters ?? []).some((p: any) => p.$ref === "#/components/parameters/IdempotencyKey");
        expect(hasIdem).toBe(method === "post");
        if (method === "post" || method === "patch") {
          const schema = op.requestBody.content["application/json"].schema;
          expect(JSON.stringify(schema)).toContain('"additionalProperties":false');
        }
      }
  });
  it("documents the specific codes: 409s and 404s", () => {
    const d = doc();
    const codes = (path: string, method: string, status: string) =>
      d.paths[path][method].responses[status]?.content["application/json"].schema.properties.error.enum;
    expect(codes("/public/v1/contacts", "post", "409")).toEqual(["ALREADY_EXISTS"]);
    expect(codes("/public/v1/appointments", "post", "409")).toEqual(["APPOINTMENT_OVERLAP"]);
    expect(codes("/public/v1/conversations/{id}/messages", "post", "409")).toEqual(["MESSAGING_SESSION_WINDOW_CLOSED"]);
    expect(codes("/public/v1/leads", "post", "422")).toEqual(["VALIDATION_ERROR", "IDEMPOTENCY_KEY_REUSE_MISMATCH"]);
    expect(codes("/public/v1/leads/{lead_id}", "get", "404")).toEqual(["NOT_FOUND"]);
    expect(d.paths["/public/v1/leads"].get.responses["404"]).toBeUndefined();
  });
  it("query bounds are documented as integers", () => {
    const params = doc().paths["/public/v1/leads"].get.parameters;
    expect(params.find((p: any) => p.name === "limit").schema).toEqual({ type: "integer", minimum: 1, maximum: 200, default: 50 });
    expect(params.find((p: any) => p.name === "offset").schema).toMatchObject({ type: "integer", minimum: 0, default: 0 });
  });
  it("is served at /public/v1/openapi.json without a key and without rate limiting", async () => {
    const r = await fetch(`${app.url}/public/v1/openapi.json`);
    expect(r.status).toBe(200);
    expect(r.headers.get("x-ratelimit-limit")).toBeNull();
    expect(await r.json()).toEqual(doc());
  });
  it("the committed openapi.json is up to date (npm run openapi)", () => {
    expect(JSON.parse(readFileSync("openapi.json", "utf8"))).toEqual(doc());
  });
});

describe("conformance hook", () => {
  it("accepts a real response and counts it", async () => {
    const before = checked.responses;
    await app.request("GET", "/public/v1/me", { key });
    expect(checked.responses).toBe(before + 1);
  });
  it("fails an undocumented status", () => {
    const h = new Headers({ "X-RateLimit-Limit": "1", "X-RateLimit-Remaining": "1", "X-RateLimit-Reset": "1", "X-Request-Id": "x" });
    expect(() => assertConforms("GET", "http://x/public/v1/leads", 404, h, {})).toThrow(/does not list/);
  });
  it("fails a body that does not match", () => {
    const h = new Headers({ "X-RateLimit-Limit": "1", "X-RateLimit-Remaining": "1", "X-RateLimit-Reset": "1", "X-Request-Id": "x" });
    expect(() => assertConforms("GET", "http://x/public/v1/me", 200, h, { tenantId: 1 })).toThrow(/does not match/);
    expect(() => assertConforms("GET", "http://x/public/v1/me", 401, h, { error: "NOT_FOUND", message: "", request_id: "x", details: {} })).toThrow(/does not match/);
  });
  it("fails missing rate-limit headers", () => {
    expect(() => assertConforms("GET", "http://x/public/v1/me", 401, new Headers(), { error: "INVALID_CREDENTIALS", message: "", request_id: "x", details: {} })).toThrow(/lacks header/);
  });
});
