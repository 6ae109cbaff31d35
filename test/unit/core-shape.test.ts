// The tRPC core has no HTTP inside it: no file under routers/ imports node's HTTP module, Express or
// parseurl, or names node's request or response; and the procedures' context carries neither (a
// compile-time check: `npm run typecheck` fails when a Context member is a node request or response).
import { readdirSync, readFileSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import path from "node:path";
import { describe, expect, it } from "vitest";
import type { AdminContext } from "../../routers/admin/trpc.js";
import type { AuthedContext, Context } from "../../routers/trpc.js";

const ROOT = path.resolve(import.meta.dirname, "../..");

/** Every .ts file under a folder (recursively), relative to the repository. */
function sources(dir: string): string[] {
  return readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(`${dir}/${e.name}`) : e.name.endsWith(".ts") ? [`${dir}/${e.name}`] : [],
  );
}

/** The names of a type's members whose type is a node request or response (never, when none). */
type NodeMembers<T> = {
  [K in keyof T]-?: NonNullable<T[K]> extends IncomingMessage | ServerResponse ? K : never;
}[keyof T];
const contextCarriesNoNode: [NodeMembers<Context>, NodeMembers<AuthedContext>, NodeMembers<AdminContext>] extends [
  never,
  never,
  never,
]
  ? true
  : false = true;

describe("the core without HTTP", () => {
  it("no file under routers/ imports node:http, express or parseurl, or names IncomingMessage or ServerResponse", () => {
    const imports =
      /\bfrom\s+["'](?:node:)?(?:http|https|express|parseurl)["']|\bimport\s+["'](?:node:)?(?:http|express|parseurl)["']/;
    const names = /\b(?:IncomingMessage|ServerResponse)\b/;
    const found = sources("routers").flatMap((f) =>
      readFileSync(path.join(ROOT, f), "utf8")
        .split("\n")
        .flatMap((line, i) => (imports.test(line) || names.test(line) ? [`${f}:${i + 1}: ${line.trim()}`] : [])),
    );
    expect(found).toEqual([]);
    expect(sources("routers").length).toBeGreaterThan(40);
  });

  it("every file under routers/ is named in kebab-case (a folder's _router.ts and _lib/ aside)", () => {
    const named = sources("routers").filter(
      (f) => !/^[a-z0-9]+(?:-[a-z0-9]+)*\.ts$|^_router\.ts$/.test(path.basename(f)),
    );
    expect(named).toEqual([]);
  });

  it("the context types carry no node request or response (checked by the compiler)", () => {
    expect(contextCarriesNoNode).toBe(true);
  });
});
