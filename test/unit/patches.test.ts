// The dependency patches of patches/ (applied by patch-package in npm ci's postinstall) are in
// place and behave as documented (docs/decisions/performance.md, "Patched dependencies").
import { spawnSync } from "node:child_process";
import { EventEmitter } from "node:events";
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it, vi } from "vitest";
// @ts-expect-error: an internal module of trpc-to-openapi, imported by path (no types for it)
import { getRequestSignal } from "../../node_modules/trpc-to-openapi/dist/esm/utils/method.mjs";

function fakeExchange() {
  const req = Object.assign(new EventEmitter(), {
    method: "POST",
    url: "/public/v1/leads",
    headers: { host: "x" },
    body: { a: 1 },
  });
  const res = Object.assign(new EventEmitter(), { writableEnded: false });
  return { req, res };
}

describe("trpc-to-openapi: getRequestSignal without a Fetch Request per call", () => {
  it("builds no Request, and the signal aborts only when the response closes unfinished (the client went away)", () => {
    const built = vi.spyOn(globalThis, "Request");
    try {
      const gone = fakeExchange();
      const signal: AbortSignal = getRequestSignal(gone.req, gone.res, 1024);
      expect(signal.aborted).toBe(false);
      gone.res.emit("close");
      expect(signal.aborted).toBe(true);

      const answered = fakeExchange();
      const kept: AbortSignal = getRequestSignal(answered.req, answered.res, 1024);
      answered.res.writableEnded = true;
      answered.res.emit("close");
      expect(kept.aborted).toBe(false);
      expect(built).not.toHaveBeenCalled();
    } finally {
      built.mockRestore();
    }
  });
});

// The REST adapter's per-request work (the same patch): the input schema's facts (void, array
// query keys, coercion) are worked out once per procedure, the procedure is called without a
// createCaller proxy, a route is found with one match, and the abort signal is made only on demand.
describe("trpc-to-openapi: the node-http handler", async () => {
  const { initTRPC } = await import("@trpc/server");
  const { z } = await import("zod");
  const { createOpenApiNodeHttpHandler } = await import("trpc-to-openapi");
  const t = initTRPC.meta<any>().context<any>().create();
  const seen: unknown[] = [];
  const router = t.router({
    list: t.procedure
      .meta({ openapi: { method: "GET", path: "/things/{id}/items" } })
      .input(z.object({ id: z.string(), tag: z.array(z.string()).optional(), n: z.number().optional() }))
      .output(z.any())
      .query(({ input, ctx }) => {
        seen.push({ input, ctx });
        return { ok: true, input };
      }),
    ping: t.procedure
      .meta({ openapi: { method: "GET", path: "/ping" } })
      .input(z.void())
      .output(z.any())
      .query(({ input }) => ({ input: input ?? null })),
    wait: t.procedure
      .meta({ openapi: { method: "GET", path: "/wait" }, abortable: true })
      .input(z.void())
      .output(z.any())
      .query(({ signal }) => {
        waited.push(signal);
        return {};
      }),
  });
  const waited: (AbortSignal | undefined)[] = [];

  async function call(url: string, readSignal: boolean) {
    const req = Object.assign(new EventEmitter(), { method: "GET", url, headers: { host: "x" } });
    let body = "";
    const res = Object.assign(new EventEmitter(), {
      statusCode: 0,
      writableEnded: false,
      headers: {} as Record<string, unknown>,
      setHeader(k: string, v: unknown) {
        this.headers[k] = v;
      },
      end(chunk: string) {
        body = chunk;
        this.writableEnded = true;
      },
    });
    let signal: AbortSignal | undefined;
    const handler = createOpenApiNodeHttpHandler({
      router,
      createContext: ({ info }: any) => {
        signal = readSignal ? info.signal : undefined;
        return { who: "ctx" };
      },
    } as any) as any;
    await handler(req, res);
    return { status: res.statusCode, body: JSON.parse(body), closeListeners: res.listenerCount("close"), signal, res };
  }

  it("coerces query input the same on every request (a key given once for an array, a number), with the path's parameters", async () => {
    for (let i = 0; i < 3; i++) {
      const r = await call("/things/ab12/items?tag=x&n=7", false);
      expect(r.status).toBe(200);
      expect(r.body).toEqual({ ok: true, input: { id: "ab12", tag: ["x"], n: 7 } });
    }
    const two = await call("/THINGS/q/items?tag=x&tag=y", false);
    expect(two.body.input).toEqual({ id: "q", tag: ["x", "y"] });
    expect((seen.at(-1) as any).ctx).toEqual({ who: "ctx" });
    expect((await call("/ping", false)).body).toEqual({ input: null });
  });

  it("makes the abort signal only when createContext reads it, and it still aborts when the client goes away", async () => {
    const lazy = await call("/ping", false);
    expect(lazy.closeListeners).toBe(0);
    const read = await call("/ping", true);
    expect(read.closeListeners).toBe(1);
    expect(read.signal?.aborted).toBe(false);
    read.res.writableEnded = false;
    read.res.emit("close");
    expect(read.signal?.aborted).toBe(true);
  });

  it("hands the abort signal to a procedure whose meta says abortable (a long-poll), and to no other", async () => {
    const w = await call("/wait", false);
    expect(w.closeListeners).toBe(1);
    const signal = waited.at(-1)!;
    expect(signal.aborted).toBe(false);
    w.res.writableEnded = false;
    w.res.emit("close");
    expect(signal.aborted).toBe(true);
    expect((await call("/ping", false)).closeListeners).toBe(0);
  });

  it("answers 404 for a path no procedure has", async () => {
    const r = await call("/things", false);
    expect(r.status).toBe(404);
  });
});

// patches/@trpc+server+11.25.2.patch: the middleware chain copies with native spread, not the
// transpiled helper; what a middleware and a resolver see is unchanged.
describe("@trpc/server: the middleware chain without the _objectSpread2 helper", async () => {
  const { readFileSync } = await import("node:fs");
  const { initTRPC } = await import("@trpc/server");
  const { z } = await import("zod");

  it("callRecursive and the validators use native spread (the patch is applied)", () => {
    const src = readFileSync(
      new URL("../../node_modules/@trpc/server/dist/initTRPC-DPoVGUwX.mjs", import.meta.url),
      "utf8",
    );
    const chain = src.slice(src.indexOf("async function callRecursive"), src.indexOf("function createProcedureCaller"));
    expect(chain).toContain("...opts,");
    expect(chain).not.toContain("_objectSpread2");
    expect(src).not.toContain("_objectSpread2(_objectSpread2({}, result), {}, { data })");
  });

  it("contexts merge, inputs merge and the output is parsed as before", async () => {
    const t = initTRPC.context<{ a: number; b?: number }>().create();
    const p = t.procedure
      .use(({ ctx, next }) => next({ ctx: { b: ctx.a + 1 } }))
      .input(z.object({ x: z.number() }))
      .input(z.object({ y: z.string() }))
      .use(({ ctx, input, next }) => next({ ctx: { ...ctx, seen: input } }))
      .output(z.object({ sum: z.number(), ctx: z.any() }))
      .query(({ ctx, input }) => ({ sum: ctx.a + (ctx.b ?? 0) + input.x, ctx, extra: "dropped by the output schema" }));
    const caller = t.router({ p }).createCaller({ a: 1 });
    const out = await caller.p({ x: 5, y: "k" } as any);
    expect(out).toEqual({ sum: 8, ctx: { a: 1, b: 2, seen: { x: 5, y: "k" } } });
  });
});

describe("patched dependencies are pinned: postinstall refuses a drift (scripts/check-patches.mjs)", () => {
  function project(installed: string, declared: string) {
    const dir = mkdtempSync(path.join(tmpdir(), "crm-patches-"));
    mkdirSync(path.join(dir, "scripts"));
    mkdirSync(path.join(dir, "patches"));
    mkdirSync(path.join(dir, "node_modules", "@scope", "lib"), { recursive: true });
    copyFileSync("scripts/check-patches.mjs", path.join(dir, "scripts", "check-patches.mjs"));
    writeFileSync(path.join(dir, "patches", "@scope+lib+1.2.3.patch"), "");
    writeFileSync(
      path.join(dir, "node_modules", "@scope", "lib", "package.json"),
      JSON.stringify({ version: installed }),
    );
    writeFileSync(path.join(dir, "package.json"), JSON.stringify({ dependencies: { "@scope/lib": declared } }));
    const r = spawnSync(process.execPath, [path.join(dir, "scripts", "check-patches.mjs")], { encoding: "utf8" });
    rmSync(dir, { recursive: true, force: true });
    return r;
  }

  it("this checkout's patches match the installed, exactly pinned versions", () => {
    const r = spawnSync(process.execPath, ["scripts/check-patches.mjs"], { encoding: "utf8" });
    expect(r.stderr).toBe("");
    expect(r.status).toBe(0);
  });

  it("another installed version: exit 1 and one line naming the patch and both versions", () => {
    const r = project("1.2.4", "1.2.3");
    expect(r.status).toBe(1);
    expect(r.stderr.trim().split("\n")).toHaveLength(1);
    expect(r.stderr).toContain(
      "patches/@scope+lib+1.2.3.patch is for @scope/lib@1.2.3 but @scope/lib@1.2.4 is installed",
    );
  });

  it("a range in package.json: exit 1, pin it exactly", () => {
    const r = project("1.2.3", "^1.2.3");
    expect(r.status).toBe(1);
    expect(r.stderr.trim()).toBe(
      "patches/@scope+lib+1.2.3.patch is for @scope/lib@1.2.3 but package.json asks for @scope/lib@^1.2.3: pin " +
        'it exactly ("1.2.3")',
    );
  });
});
