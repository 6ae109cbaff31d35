// The OpenAPI document: valid (swagger-parser), exact on the spec's operations, served without a key,
// committed file up to date; and the conformance hook itself can fail.
// As tools read it: Spectral's spectral:oas and Redocly's recommended rules (CI's `npm run
// lint:openapi` step runs them; here, that their configs switch nothing off); every tag declared with a description; every
// operation with a request example and an error example per code of each error status; the query
// parameters as the REST adapter reads them (an empty value is absent; every declared bound holds);
// and every example, sent as is with the demo tenant's key, succeeds (what Swagger UI's "Try it out"
// sends: test/process/docs.test.ts clicks it on every create).
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import SwaggerParser from "@apidevtools/swagger-parser";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { appRouter } from "../../routers/index.js";
import { buildOpenApiDocument, TAGS } from "../../rest/openapi.js";
import { OPERATION_EXAMPLES, UNEXAMPLED_PARAMETERS } from "../../rest/examples.js";
import { ERROR_STATUS, type ErrorCode } from "../../server/errors.js";
import { demoFixture, DEMO_IDS } from "../../server/admin/demo.js";
import { ensureBuild, ROOT, serviceCommand } from "../../scripts/ensure-build.js";
import { baseEnv, freePort, waitReady } from "../helpers/processes.js";
import { assertConforms, checked, documentedOperations } from "../helpers/conformance.js";
import { startApp, type TestApp } from "../helpers/app.js";
import { fixture, tenant } from "../helpers/fixtures.js";
import { API_CACHE_HEADERS } from "../../server/http.js";

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
  // Additive.
  "GET /public/v1/changes",
  // Additive: read one object, upsert by external id, one and in batches.
  "GET /public/v1/contacts/{contact_id}",
  "GET /public/v1/tickets/{ticket_id}",
  "GET /public/v1/appointments/{appointment_id}",
  "GET /public/v1/conversations/{id}",
  "PUT /public/v1/leads/by-external-id/{externalId}",
  "PUT /public/v1/contacts/by-external-id/{externalId}",
  "PUT /public/v1/tickets/by-external-id/{externalId}",
  "POST /public/v1/leads/batch/upsert",
  "POST /public/v1/contacts/batch/upsert",
  "POST /public/v1/tickets/batch/upsert",
  // Additive: the tenant's reference data (what stageId, the user ids, channelId and template names mean).
  "GET /public/v1/stages",
  "GET /public/v1/users",
  "GET /public/v1/channels",
  "GET /public/v1/templates",
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
  it("has exactly the spec's 20 operations, the changes feed, the sync operations, the reference lists; no DELETE", () => {
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
        // Every answer, 304 and errors included, declares the cache headers (docs/decisions/api.md, "Caching").
        for (const [s, r] of Object.entries<any>(op.responses))
          for (const h of Object.keys(API_CACHE_HEADERS))
            expect(r.headers?.[h], `${method} ${path} ${s} ${h}`).toBeDefined();
        const success = Object.keys(op.responses).filter((s) => s.startsWith("2"));
        // A create answers 201; a batch upsert 200 (its items' statuses in the body); a PUT by
        // external id 201 when it created, 200 when it updated or found nothing to change.
        const expected =
          method === "put" ? ["200", "201"] : method === "post" && !path.endsWith("/batch/upsert") ? ["201"] : ["200"];
        expect(success, `${method} ${path}`).toEqual(expected);
        const hasIdem = (op.parameters ?? []).some((p: any) => p.$ref === "#/components/parameters/IdempotencyKey");
        expect(hasIdem).toBe(method === "post" || method === "put");
        if (method === "post" || method === "patch" || method === "put") {
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
    expect(params.find((p: any) => p.name === "limit").schema).toEqual({
      type: "integer",
      minimum: 1,
      maximum: 200,
      default: 50,
    });
    expect(params.find((p: any) => p.name === "offset").schema).toMatchObject({
      type: "integer",
      minimum: 0,
      default: 0,
    });
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
    const h = new Headers({
      "X-RateLimit-Limit": "1",
      "X-RateLimit-Remaining": "1",
      "X-RateLimit-Reset": "1",
      "X-Request-Id": "x",
    });
    expect(() => assertConforms("GET", "http://x/public/v1/leads", 404, h, {})).toThrow(/does not list/);
  });
  it("fails a body that does not match", () => {
    const h = new Headers({
      "X-RateLimit-Limit": "1",
      "X-RateLimit-Remaining": "1",
      "X-RateLimit-Reset": "1",
      "RateLimit-Policy": '"minute";q=1;w=60',
      RateLimit: '"minute";r=1;t=1',
      "X-Request-Id": "x",
      ...API_CACHE_HEADERS,
    });
    expect(() => assertConforms("GET", "http://x/public/v1/me", 200, h, { tenantId: 1 })).toThrow(/does not match/);
    expect(() =>
      assertConforms("GET", "http://x/public/v1/me", 401, h, {
        error: "NOT_FOUND",
        message: "",
        request_id: "x",
        details: {},
      }),
    ).toThrow(/does not match/);
  });
  it("fails missing rate-limit headers", () => {
    expect(() =>
      assertConforms("GET", "http://x/public/v1/me", 401, new Headers(), {
        error: "INVALID_CREDENTIALS",
        message: "",
        request_id: "x",
        details: {},
      }),
    ).toThrow(/lacks header/);
  });
});

// ---- the document as tools read it --------------------------------------------------

type Json = any;
/** Every operation of a document: method, path, the operation, its parameters with $refs resolved. */
function operationsOf(d: Json) {
  const out: { method: string; path: string; key: string; op: Json; params: Json[] }[] = [];
  for (const [p, item] of Object.entries<Json>(d.paths))
    for (const [method, op] of Object.entries<Json>(item)) {
      const params = (op.parameters ?? []).map((x: Json) =>
        x.$ref ? d.components.parameters[x.$ref.split("/").pop()] : x,
      );
      out.push({ method, path: p, key: `${method.toUpperCase()} ${p}`, op, params });
    }
  return out;
}

/** The request the document's example of an operation makes (as Swagger UI fills it), with `query` changes (undefined: left out). */
function exampleRequest(key: string, change: Record<string, string | undefined> = {}) {
  const { method, path: template, op, params } = operationsOf(doc()).find((o) => o.key === key)!;
  const value = (name: string) => params.find((p) => p.name === name)?.example;
  const url = template.replace(/\{([^}]+)\}/g, (_, n: string) => String(value(n)));
  const query: Record<string, string | undefined> = {};
  for (const p of params.filter((x) => x.in === "query"))
    if (p.example !== undefined) query[p.name] = String(p.example);
  return {
    method: method.toUpperCase(),
    url,
    query: { ...query, ...change },
    body: op.requestBody?.content["application/json"].examples.demo.value,
  };
}

/** Every operation, the reads first (a write changes what their filters find), then the writes in document order. */
function readsThenWrites() {
  const ops = operationsOf(doc());
  return [...ops.filter((o) => o.method === "get"), ...ops.filter((o) => o.method !== "get")].map((o) => ({
    ...o,
    success: Number(Object.keys(o.op.responses).find((s) => s.startsWith("2"))),
  }));
}

describe("the document as tools read it", () => {
  it("npm run lint:openapi (CI's step) runs Spectral's spectral:oas and Redocly's recommended rules, nothing switched off, any warning failing", () => {
    const pkg = JSON.parse(readFileSync(path.join(ROOT, "package.json"), "utf8"));
    expect(pkg.scripts["lint:openapi"]).toContain("--ruleset .spectral.yaml");
    expect(pkg.scripts["lint:openapi"]).toContain("--fail-severity=hint");
    expect(pkg.scripts["lint:openapi"]).toContain("redocly lint --config redocly.yaml");
    expect(readFileSync(path.join(ROOT, ".spectral.yaml"), "utf8")).toMatch(/^extends: spectral:oas$/m);
    // One rule is a warning, not an error (redocly.yaml: the tickets PUT path, whose method differs from
    // the comments path it fits); none is off, and there is no other rule setting.
    const redocly = readFileSync(path.join(ROOT, "redocly.yaml"), "utf8");
    expect(redocly.match(/^ {2}[\w-]+: \w+$/gm) ?? []).toEqual(["  no-ambiguous-paths: warn"]);
    for (const name of ["@stoplight/spectral-cli", "@redocly/cli"])
      expect(pkg.devDependencies[name], name).toMatch(/^\d+\.\d+\.\d+$/);
    expect(readFileSync(path.join(ROOT, ".ci/run"), "utf8")).toContain("npm run --silent lint:openapi");
  });

  it("every tag an operation uses is declared once, with a description; info has a contact and a license", () => {
    const d = doc();
    const used = new Set(operationsOf(d).flatMap((o) => o.op.tags as string[]));
    const declared = (d.tags as { name: string; description: string }[]).map((t) => t.name);
    expect(new Set(declared).size).toBe(declared.length);
    expect([...used].sort()).toEqual([...declared].sort());
    for (const t of d.tags) expect(t.description, t.name).toMatch(/\w{3,}.*\./);
    expect(d.tags).toEqual(TAGS);
    expect(d.info.contact.name).toBeTruthy();
    // package.json is private with no license: the document says proprietary, in SPDX's LicenseRef form.
    expect(JSON.parse(readFileSync(path.join(ROOT, "package.json"), "utf8")).private).toBe(true);
    expect(d.info.license).toEqual({
      name: expect.stringMatching(/Proprietary/),
      identifier: "LicenseRef-Proprietary",
    });
  });

  it("every operation has a request example: its body and every parameter but the opaque ones; no example names a missing operation or parameter", () => {
    const d = doc();
    const ops = operationsOf(d);
    expect(Object.keys(OPERATION_EXAMPLES).sort()).toEqual(ops.map((o) => o.key).sort());
    for (const { key, op, params } of ops) {
      const ex = OPERATION_EXAMPLES[key]!;
      for (const p of params) {
        if (p.name in UNEXAMPLED_PARAMETERS || `${key} ${p.name}` in UNEXAMPLED_PARAMETERS)
          expect(p.example, `${key} ${p.name}`).toBeUndefined();
        else expect(p.example, `${key} ${p.name}`).toBeDefined();
      }
      for (const name of Object.keys(ex.parameters ?? {}))
        expect(
          params.map((p) => p.name),
          `${key}: example of an unknown parameter`,
        ).toContain(name);
      const media = op.requestBody?.content?.["application/json"];
      expect(Boolean(media), key).toBe(ex.body !== undefined);
      if (media) expect(media.examples.demo).toEqual({ summary: ex.summary, value: ex.body });
    }
  });

  it("each error status has one example per code it lists, each with that code, a real message and the envelope's fields", () => {
    const d = doc();
    let count = 0;
    for (const { key, op } of operationsOf(d)) {
      for (const [status, r] of Object.entries<Json>(op.responses)) {
        if (Number(status) < 400) continue;
        const media = r.content["application/json"];
        const codes: ErrorCode[] = media.schema.properties.error.enum;
        expect(Object.keys(media.examples).sort(), `${key} ${status}`).toEqual([...codes].sort());
        for (const [code, ex] of Object.entries<Json>(media.examples)) {
          const v = ex.value;
          expect(ERROR_STATUS[v.error as ErrorCode], `${key} ${status} ${code}`).toBe(Number(status));
          expect(v.error).toBe(code);
          expect(Object.keys(v).sort()).toEqual(["details", "error", "message", "request_id"]);
          expect(v.message.length, `${key} ${code}`).toBeGreaterThan(10);
          expect(typeof v.details).toBe("object");
          expect(ex.summary).toBeTruthy();
          count++;
        }
        // The 404 names what was not found; the 403 names the operation's own scope.
        if (media.examples.NOT_FOUND) expect(media.examples.NOT_FOUND.value.message, key).not.toMatch(/^Resource/);
        const denied = media.examples.PERMISSION_DENIED?.value;
        if (denied)
          expect(op.description, key).toContain(denied.details.requiredScope ?? denied.details.requiredScopes[0]);
        // A validation error names the failing field, as the service's do.
        if (media.examples.VALIDATION_ERROR)
          expect(media.examples.VALIDATION_ERROR.value.details.fields[0].field, key).toBeTruthy();
      }
    }
    expect(count).toBeGreaterThan(150);
  });

  it("optional query parameters say an empty value is absent (allowEmptyValue, no minLength 1); required ones do not", () => {
    let optional = 0;
    for (const { key, params } of operationsOf(doc()))
      for (const p of params.filter((x) => x.in === "query")) {
        if (p.required) expect(p.allowEmptyValue, `${key} ${p.name}`).toBeUndefined();
        else {
          optional++;
          expect(p.allowEmptyValue, `${key} ${p.name}`).toBe(true);
          expect(p.schema.minLength ?? 0, `${key} ${p.name}`).toBe(0);
        }
      }
    expect(optional).toBeGreaterThan(30);
    const search = doc().paths["/public/v1/contacts"].get.parameters.find((p: Json) => p.name === "search");
    expect(search.schema).toEqual({ type: "string", maxLength: 200, description: expect.any(String) });
  });
});

describe("the examples and parameters against the demo tenant (what Try it out sends)", () => {
  let demo: TestApp;
  let demoKey: string;
  // The clock of the examples' dates (availability in March 2027 is in the future).
  const NOW = new Date("2026-11-20T12:00:00Z");
  beforeAll(async () => {
    demo = await startApp();
    demo.setNow(NOW);
    const loaded = demoFixture(NOW, { fixedIds: true });
    // These checks send ~190 requests within a minute (every query parameter, bound and example),
    // more than the demo key's 180 a minute: the quota is not what they check.
    loaded.tenants[0]!.rateLimit = { perMinute: 10_000, perDay: 100_000 };
    demoKey = (await demo.load(loaded)).tenants.demo!.apiKeys.demo!.key;
  }, 120_000);
  afterAll(() => demo?.close());

  const send = (r: ReturnType<typeof exampleRequest>) =>
    demo.request(r.method, r.url, { key: demoKey, query: r.query, body: r.body });
  const gets = () => operationsOf(doc()).filter((o) => o.method === "get");

  it("GET /contacts?search= (empty) answers 200 with what no search answers, as the document says", async () => {
    const all = await demo.request("GET", "/public/v1/contacts", { key: demoKey });
    const empty = await demo.request("GET", "/public/v1/contacts", { key: demoKey, query: { search: "" } });
    expect(empty.status).toBe(200);
    expect(empty.body.total).toBe(2);
    // stableBefore is the clock's (whole seconds): the two answers may straddle a second.
    expect({ ...empty.body, stableBefore: undefined }).toEqual({ ...all.body, stableBefore: undefined });
    // The document agrees: an empty value is allowed, and no minimum length says otherwise.
    const p = doc().paths["/public/v1/contacts"].get.parameters.find((x: Json) => x.name === "search");
    expect(p.allowEmptyValue).toBe(true);
    expect(p.schema.minLength).toBeUndefined();
  });

  it("every optional query parameter sent empty answers as without it (200); a required one sent empty is 422 naming it", async () => {
    let n = 0;
    for (const { key, params } of gets())
      for (const p of params.filter((x) => x.in === "query")) {
        const base = exampleRequest(key, { [p.name]: undefined });
        const r = await send({ ...base, query: { ...base.query, [p.name]: "" } });
        if (p.required) {
          expect(r.status, `${key} ${p.name}=`).toBe(422);
          expect(r.body.details.fields.map((f: Json) => f.field)).toContain(p.name);
        } else {
          expect(r.status, `${key} ${p.name}=`).toBe(200);
          const without = await send(base);
          // stableBefore is the clock's (the two answers are a moment apart).
          const timeless = (b: Json) =>
            b && typeof b === "object" && "stableBefore" in b ? { ...b, stableBefore: "<clock>" } : b;
          expect(timeless(r.body), `${key} ${p.name}=`).toEqual(timeless(without.body));
        }
        n++;
      }
    expect(n).toBeGreaterThan(30);
  }, 120_000);

  it("every bound the document declares on a query parameter holds: integers at their bounds 200, one past 422; strings one past maxLength 422; a pattern's miss 422", async () => {
    const checks: string[] = [];
    for (const { key, params } of gets())
      for (const p of params.filter((x) => x.in === "query")) {
        const s = p.schema;
        const at = async (value: string, status: number) => {
          const r = await send(exampleRequest(key, { [p.name]: value }));
          expect(r.status, `${key} ${p.name}=${value.slice(0, 20)}…`).toBe(status);
          if (status === 422)
            expect(
              r.body.details.fields.map((f: Json) => f.field),
              `${key} ${p.name}`,
            ).toContain(p.name);
          checks.push(`${key} ${p.name}`);
        };
        if (s.type === "integer") {
          await at(String(s.minimum), 200);
          await at(String(s.minimum - 1), 422);
          await at(String(s.maximum), 200);
          await at(String(s.maximum + 1), 422);
          await at("1.5", 422);
        }
        if (s.maxLength !== undefined) await at("a".repeat(s.maxLength + 1), 422);
        if (s.pattern !== undefined) await at("not-a-valid-value", 422);
      }
    // limit/offset of five lists, messages' limit, changes' limit, the ids and dates: all of them.
    expect(new Set(checks).size).toBeGreaterThan(25);
  }, 180_000);

  it("every operation's example, sent as is with the demo key, answers its success status; the lists find the demo's objects", async () => {
    const created: string[] = [];
    for (const { key, success } of readsThenWrites()) {
      const r = await send(exampleRequest(key));
      expect(r.status, `${key}: ${r.text.slice(0, 300)}`).toBe(success);
      if (Array.isArray(r.body.items)) expect(r.body.items.length, `${key} finds nothing`).toBeGreaterThan(0);
      if (key === "GET /public/v1/availability") expect(r.body.slots.length).toBeGreaterThan(0);
      if (key === "GET /public/v1/me") expect(r.body.tenantId).toBeDefined();
      if (success === 201) created.push(key);
    }
    expect(created).toHaveLength(7);
    // What the writes did is there: the lead moved, the contact renamed, the ticket handed to Luis.
    const lead = await demo.request("GET", `/public/v1/leads/${DEMO_IDS.leads.l1}`, { key: demoKey });
    expect(lead.body.stageId).toBe(DEMO_IDS.stages.qualified);
    const tickets = await demo.request("GET", "/public/v1/tickets", {
      key: demoKey,
      query: { assignedTo: DEMO_IDS.users.luis, limit: 200 },
    });
    expect(tickets.body.items.map((t: Json) => t.id)).toContain(DEMO_IDS.tickets.t1);
    // A second try of the contact create is the 409 its example documents (the phone is taken now).
    const again = await send(exampleRequest("POST /public/v1/contacts"));
    expect(again.status).toBe(409);
    expect(again.body.error).toBe("ALREADY_EXISTS");
  }, 120_000);
});

describe("the first npm start on an empty embedded database (the demo as a newcomer gets it)", () => {
  // The embedded first start is the same code in every CI leg: run where the embedded database is the default.
  const skip = Boolean(process.env.DATABASE_URL);
  const dir = mkdtempSync(path.join(tmpdir(), "crm-openapi-demo-"));
  let child: ChildProcess | undefined;
  afterAll(async () => {
    if (child && child.exitCode === null) {
      const exited = new Promise((r) => child!.once("exit", r));
      child.kill("SIGTERM");
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  });

  it.skipIf(skip)(
    "holds the objects the examples name: every example, with the key the start printed, answers its success status",
    { timeout: 180_000 },
    async () => {
      await ensureBuild();
      const port = await freePort();
      const env: NodeJS.ProcessEnv = {
        ...baseEnv(),
        PGLITE_DATA_DIR: path.join(dir, "data"),
        PORT: String(port),
        LOG_LEVEL: "warn",
      };
      delete env.NODE_OPTIONS;
      const { command, args } = serviceCommand();
      child = spawn(command, args, { cwd: ROOT, env, stdio: ["ignore", "pipe", "pipe"] });
      let out = "";
      child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
      child.stderr!.on("data", (d: Buffer) => (out += d.toString()));
      const exited = new Promise<void>((r) => child!.once("exit", () => r()));
      const spawned = {
        child,
        out: () => out,
        err: () => "",
        exited: exited.then(() => ({ code: null, signal: null, at: Date.now() })),
      };
      expect(await waitReady(`http://127.0.0.1:${port}/healthz`, spawned, 90_000), out).toBe(true);
      const key = /API key \(shown once\): (\S+)/.exec(out)?.[1];
      expect(key, out).toBeDefined();
      const base = `http://127.0.0.1:${port}`;
      const statuses: Record<string, number> = {};
      for (const { key: op, success } of readsThenWrites()) {
        const r = exampleRequest(op);
        const qs = new URLSearchParams(
          Object.entries(r.query).filter((e): e is [string, string] => e[1] !== undefined),
        ).toString();
        const res = await fetch(`${base}${r.url}${qs ? `?${qs}` : ""}`, {
          method: r.method,
          headers: { "X-API-Key": key!, ...(r.body ? { "Content-Type": "application/json" } : {}) },
          body: r.body ? JSON.stringify(r.body) : undefined,
        });
        const body = (await res.json()) as { items?: unknown[] };
        statuses[op] = res.status;
        expect(res.status, `${op}: ${JSON.stringify(body).slice(0, 300)}`).toBe(success);
        if (Array.isArray(body.items)) expect(body.items.length, `${op} finds nothing`).toBeGreaterThan(0);
      }
      expect(Object.keys(statuses)).toHaveLength(SPEC_OPERATIONS.length);
    },
  );
});
