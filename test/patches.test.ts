// The dependency patches of patches/ (applied by patch-package in npm ci's postinstall) are in
// place and behave as documented (docs/decisions.md, "Patched dependencies").
import { EventEmitter } from "node:events";
import { describe, expect, it, vi } from "vitest";
// @ts-expect-error: an internal module of trpc-to-openapi, imported by path (no types for it)
import { getRequestSignal } from "../node_modules/trpc-to-openapi/dist/esm/utils/method.mjs";

function fakeExchange() {
  const req = Object.assign(new EventEmitter(), { method: "POST", url: "/public/v1/leads", headers: { host: "x" }, body: { a: 1 } });
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
