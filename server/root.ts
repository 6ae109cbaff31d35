// The checkout's root (the folder of package.json): what run-time files are found from — the SQL
// migrations under prisma/, the default embedded database folder .data/ — so that they resolve the
// same whether this code runs from its .ts source under tsx (server/root.ts) or bundled
// (dist/server/main.js): the nearest ancestor folder of this module that holds a package.json.
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

function findRoot(from: string): string {
  for (let dir = from; ; dir = path.dirname(dir)) {
    if (existsSync(path.join(dir, "package.json"))) return dir;
    if (path.dirname(dir) === dir) throw new Error(`no package.json above ${from}`);
  }
}

export const ROOT = findRoot(path.dirname(fileURLToPath(import.meta.url)));

/** A path relative to the checkout's root. */
export const fromRoot = (...parts: string[]) => path.join(ROOT, ...parts);
