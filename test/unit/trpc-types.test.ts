// client/trpc.d.ts: the tRPC router types an internal app imports without compiling
// the service. Checked three ways:
// - it is what scripts/trpc-types.ts generates from routers/client-types.ts now (the CI staleness
//   check, `npm run --silent client:trpc -- --check`, is the same comparison);
// - it infers exactly the inputs, outputs, procedure kinds, error shape and client call signatures
//   of the real routers (type assertions below: `npm run typecheck` fails on a difference);
// - an app type-checks against it alone: examples/internal-app's own tsconfig lists no file of the
//   service (tsc --listFiles), and the declaration imports nothing but @trpc/server.
import { execFile } from "node:child_process";
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import type { TRPCClient } from "@trpc/client";
import type { AnyRouter, inferRouterError, inferRouterInputs, inferRouterOutputs } from "@trpc/server";
import { afterAll, describe, expect, expectTypeOf, it } from "vitest";
import type * as Declared from "../../client/trpc.js";
import type * as Real from "../../routers/client-types.js";
import { ROOT } from "../../scripts/ensure-build.js";
import { staleness, TRPC_DECLARATION } from "../../scripts/trpc-types.js";

const run = promisify(execFile);
const tmp = mkdtempSync(path.join(tmpdir(), "crm-trpc-types-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

// --- the declaration infers what the routers infer (checked by tsc, `npm run typecheck`) ---------
type KindsOf<T> = { [K in keyof T]: T[K] extends { _def: { procedure: true; type: infer X } } ? X : KindsOf<T[K]> };
type Kinds<R extends AnyRouter> = KindsOf<R["_def"]["record"]>;

expectTypeOf<inferRouterInputs<Declared.AppRouter>>().toEqualTypeOf<inferRouterInputs<Real.AppRouter>>();
expectTypeOf<inferRouterOutputs<Declared.AppRouter>>().toEqualTypeOf<inferRouterOutputs<Real.AppRouter>>();
expectTypeOf<Kinds<Declared.AppRouter>>().toEqualTypeOf<Kinds<Real.AppRouter>>();
expectTypeOf<inferRouterError<Declared.AppRouter>>().toEqualTypeOf<inferRouterError<Real.AppRouter>>();
expectTypeOf<TRPCClient<Declared.AppRouter>>().toEqualTypeOf<TRPCClient<Real.AppRouter>>();
expectTypeOf<inferRouterInputs<Declared.AdminRouter>>().toEqualTypeOf<inferRouterInputs<Real.AdminRouter>>();
expectTypeOf<inferRouterOutputs<Declared.AdminRouter>>().toEqualTypeOf<inferRouterOutputs<Real.AdminRouter>>();
expectTypeOf<Kinds<Declared.AdminRouter>>().toEqualTypeOf<Kinds<Real.AdminRouter>>();
expectTypeOf<inferRouterError<Declared.AdminRouter>>().toEqualTypeOf<inferRouterError<Real.AdminRouter>>();
expectTypeOf<Declared.AppInputs>().toEqualTypeOf<Real.AppInputs>();
expectTypeOf<Declared.AppOutputs>().toEqualTypeOf<Real.AppOutputs>();

const TSC = path.join(ROOT, "node_modules/typescript/bin/tsc");

describe("client/trpc.d.ts", () => {
  it("package.json pins @trpc/client to exactly @trpc/server's version, and that version is installed", () => {
    const pkg = JSON.parse(readFileSync(path.join(ROOT, "package.json"), "utf8"));
    const installed = (name: string) =>
      JSON.parse(readFileSync(path.join(ROOT, "node_modules", name, "package.json"), "utf8")).version;
    expect(pkg.dependencies["@trpc/server"]).toMatch(/^\d+\.\d+\.\d+$/);
    expect(pkg.devDependencies["@trpc/client"]).toBe(pkg.dependencies["@trpc/server"]);
    expect(installed("@trpc/client")).toBe(pkg.dependencies["@trpc/server"]);
    expect(installed("@trpc/server")).toBe(pkg.dependencies["@trpc/server"]);
  });

  it("CI's staleness check (npm run client:trpc -- --check) sees a changed type and a missing file; the file imports only @trpc/server's types", () => {
    const committed = path.join(ROOT, TRPC_DECLARATION);
    const text = readFileSync(committed, "utf8");
    expect(staleness(text, committed)).toBeNull();
    const stale = path.join(tmp, "trpc.d.ts");
    writeFileSync(stale, text.replace("customerName: string;", "customerName: string | null;"));
    expect(staleness(text, stale)).toMatch(
      /trpc\.d\.ts is stale \(first difference at line \d+\): run `npm run client:trpc` and commit it$/,
    );
    expect(staleness(text, path.join(tmp, "missing.d.ts"))).toMatch(/is stale/);
    const imports = [...text.matchAll(/^import .* from "([^"]+)";$/gm)].map((m) => m[1]);
    expect(imports).toEqual(["@trpc/server"]);
  });

  it("a program type-checked against it fails on a wrong call (the types are not `any`)", {
    timeout: 120_000,
  }, async () => {
    const dir = mkdtempSync(path.join(ROOT, "examples/.typecheck-"));
    try {
      writeFileSync(
        path.join(dir, "wrong.ts"),
        [
          'import { createTRPCClient, httpBatchLink } from "@trpc/client";',
          `import type { AppRouter } from "${path.relative(dir, path.join(ROOT, "client/trpc.js"))}";`,
          'const crm = createTRPCClient<AppRouter>({ links: [httpBatchLink({ url: "http://127.0.0.1:1/trpc" })] });',
          "export const a = crm.leads.list.query({ limit: 5 }).then((p) => p.items[0]?.customerName.toUpperCase());",
          'export const b = crm.leads.get.query({ lead: "x" });',
          "export const c = crm.tickets.create.mutate();",
          "export const d = crm.me.get.query().then((m) => m.nothing);",
        ].join("\n"),
      );
      copyFileSync(path.join(ROOT, "examples/internal-app/tsconfig.json"), path.join(dir, "tsconfig.json"));
      const result = await run(process.execPath, [TSC, "-p", dir], { cwd: ROOT }).then(
        () => ({ code: 0, out: "" }),
        (e: { code: number; stdout: string }) => ({ code: e.code, out: e.stdout }),
      );
      expect(result.code).not.toBe(0);
      const errors = result.out.split("\n").filter((l) => /error TS\d+/.test(l));
      expect(errors.map((l) => l.match(/wrong\.ts\((\d+),/)?.[1])).toEqual(["5", "6", "7"]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
