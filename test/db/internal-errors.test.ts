// Internal errors are 500: a procedure's result that fails its own `.output()`
// schema is a server bug — 500 INTERNAL_ERROR with the envelope (nothing of the output's fields in
// it), logged once at error level with the request id, the procedure and the failing output paths —
// never the 422 VALIDATION_ERROR of the client's input. On /public/v1 and /trpc, through the real
// facade and tRPC mount (rest/facade.ts publicApi, rest/trpc.ts internalTrpc) serving a test-only
// router next to the real one.
import { exchangeOf } from "../../server/exchange.js";
import { randomUUID } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { TRPCError } from "@trpc/server";
import express from "express";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { z } from "zod";
import { Text } from "../../routers/_lib/schemas.js";
import { appRouter } from "../../routers/index.js";
import { router, scoped } from "../../routers/trpc.js";
import { isPublicRequest, publicApi } from "../../rest/facade.js";
import { internalTrpc } from "../../rest/trpc.js";
import { AppError, toAppError } from "../../server/errors.js";
import { startApp, type TestApp } from "../helpers/app.js";
import { fixture, tenant } from "../helpers/fixtures.js";

/** The test-only procedures: results that break their own output schemas (and a correct one). */
const brokenRouter = router({
  broken: router({
    list: scoped("tenant:leads.read")
      .meta({
        openapi: {
          method: "GET",
          path: "/public/v1/broken",
          tags: ["test"],
          summary: "A read whose output breaks its schema",
          protect: true,
        },
      })
      .input(z.object({ ok: z.string().optional() }))
      .output(z.object({ items: z.array(z.object({ name: z.string() })), total: z.number().int() }))
      .query(({ input }) =>
        input.ok
          ? { items: [{ name: "fine" }], total: 1 }
          : ({ items: [{ name: "a" }, { name: 42 }], total: "1" } as any),
      ),
    create: scoped("tenant:leads.manage")
      .meta({
        openapi: {
          method: "POST",
          path: "/public/v1/broken",
          tags: ["test"],
          summary: "A write whose output breaks its schema",
          protect: true,
        },
        successStatus: 201,
      })
      .input(z.object({ name: Text(20) }).strict())
      .output(z.object({ id: z.uuid(), name: z.string() }))
      .mutation(({ input }) => ({ id: "not-a-uuid", name: input.name })),
  }),
});
const testRouter = router({ ...appRouter._def.record, ...brokenRouter._def.record }) as unknown as typeof appRouter;

let app: TestApp;
let server: Server;
let url: string;
let key: string;

beforeAll(async () => {
  app = await startApp();
  const loaded = await app.load(fixture(tenant("acme")));
  key = loaded.tenants.acme!.apiKeys.full!.key;
  // What createApp does for these two prefixes (request id, the facade, the /trpc mount), over the test router.
  const api = publicApi(app.services, testRouter);
  const rest = express();
  rest.set("query parser", "simple");
  rest.use(internalTrpc(app.services, testRouter));
  server = createServer((req, res) => {
    const id = randomUUID();
    exchangeOf(req).id = id;
    res.setHeader("X-Request-Id", id);
    if (isPublicRequest(req)) api(req, res);
    else rest(req, res);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise<void>((r) => {
    server?.close(() => r());
    server?.closeAllConnections();
  });
  await app?.close();
});

async function call(method: string, path: string, body?: unknown) {
  const res = await fetch(url + path, {
    method,
    headers: { "X-API-Key": key, ...(body === undefined ? {} : { "Content-Type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, body: (await res.json()) as any };
}

/** Runs `fn` with the logger's error and warn watched; returns what they were called with. */
async function logged<T>(fn: () => Promise<T>): Promise<{ result: T; errors: any[][]; warns: any[][] }> {
  const error = vi.spyOn(app.services.logger, "error");
  const warn = vi.spyOn(app.services.logger, "warn");
  try {
    const result = await fn();
    return { result, errors: error.mock.calls.map((c) => [...c]), warns: warn.mock.calls.map((c) => [...c]) };
  } finally {
    error.mockRestore();
    warn.mockRestore();
  }
}

const INTERNAL = { error: "INTERNAL_ERROR", message: "Internal server error", details: {} };

/** The one error line of a request: its id, the procedure, the failing output paths. */
function expectOneLogLine(errors: any[][], requestId: string, procedure: string, paths: string[]) {
  expect(errors).toHaveLength(1);
  const [fields, msg] = errors[0]!;
  expect(msg).toBe("request failed");
  expect(fields).toMatchObject({
    reqId: requestId,
    procedure,
    failure: "output validation",
    outputIssueCount: paths.length,
  });
  expect(fields.outputIssues.map((i: { path: string }) => i.path).sort()).toEqual([...paths].sort());
  expect(fields.err).toBeDefined();
}

describe("an output that fails its own schema → 500 INTERNAL_ERROR, logged once with the request id and the failing paths", () => {
  it("over /public/v1: a read", async () => {
    const { result: r, errors, warns } = await logged(() => call("GET", "/public/v1/broken"));
    expect(r.status).toBe(500);
    expect(r.body).toEqual({ ...INTERNAL, request_id: r.headers.get("x-request-id") });
    expect(r.body.request_id).toMatch(/^[0-9a-f-]{36}$/);
    expectOneLogLine(errors, r.body.request_id, "broken.list", ["items.1.name", "total"]);
    expect(warns).toEqual([]);
  });
  it("over /public/v1: a write (the client's own input errors stay 422)", async () => {
    const { result: r, errors } = await logged(() => call("POST", "/public/v1/broken", { name: "x" }));
    expect(r.status).toBe(500);
    expect(r.body).toEqual({ ...INTERNAL, request_id: r.headers.get("x-request-id") });
    expectOneLogLine(errors, r.body.request_id, "broken.create", ["id"]);
    const { result: bad, errors: none } = await logged(() => call("POST", "/public/v1/broken", { name: 5 }));
    expect(bad.status).toBe(422);
    expect(bad.body.error).toBe("VALIDATION_ERROR");
    expect(bad.body.details.fields.map((f: { field: string }) => f.field)).toEqual(["name"]);
    expect(none).toEqual([]);
  });
  it("a correct output of the same procedure is answered (the test router serves)", async () => {
    const r = await call("GET", "/public/v1/broken?ok=1");
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ items: [{ name: "fine" }], total: 1 });
  });
  it("over /trpc: a query and a mutation; tRPC's shape with the envelope", async () => {
    for (const [method, path, body, procedure, paths] of [
      [
        "GET",
        `/trpc/broken.list?input=${encodeURIComponent("{}")}`,
        undefined,
        "broken.list",
        ["items.1.name", "total"],
      ],
      ["POST", "/trpc/broken.create", { name: "x" }, "broken.create", ["id"]],
    ] as const) {
      const { result: r, errors } = await logged(() => call(method, path, body));
      expect(r.status).toBe(500);
      const id = r.headers.get("x-request-id");
      expect(r.body.error).toMatchObject({
        message: "Internal server error",
        data: { code: "INTERNAL_SERVER_ERROR", httpStatus: 500, path: procedure },
      });
      expect(r.body.error.data.envelope).toEqual({ ...INTERNAL, request_id: id });
      expect(JSON.stringify(r.body)).not.toContain("items.1.name");
      expectOneLogLine(errors, id!, procedure, [...paths]);
    }
  });
});

describe("toAppError on tRPC's own signal", () => {
  const zodError = (() => {
    const r = z.object({ a: z.string() }).safeParse({ a: 1 });
    return r.success ? undefined : r.error;
  })()!;
  it("TRPCError INTERNAL_SERVER_ERROR 'Output validation failed' with a zod cause → INTERNAL_ERROR, the paths kept for the log only", () => {
    const app = toAppError(
      new TRPCError({ code: "INTERNAL_SERVER_ERROR", message: "Output validation failed", cause: zodError }),
    );
    expect(app).toBeInstanceOf(AppError);
    expect(app.status).toBe(500);
    expect(app.code).toBe("INTERNAL_ERROR");
    expect(app.details).toEqual({});
    expect(app.logFields).toMatchObject({
      failure: "output validation",
      outputIssues: [{ path: "a", code: "invalid_type" }],
      outputIssueCount: 1,
    });
  });
  it("the input's zod error (BAD_REQUEST) is still the client's 422", () => {
    const app = toAppError(new TRPCError({ code: "BAD_REQUEST", message: "Input validation failed", cause: zodError }));
    expect(app.status).toBe(422);
    expect(app.code).toBe("VALIDATION_ERROR");
    expect(app.details.fields).toEqual([{ field: "a", code: "invalid_type", message: expect.any(String) }]);
  });
});
