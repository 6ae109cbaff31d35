// The compiled service for whatever starts it as a process (the drills, the benchmark, the build
// test): build dist/ when it is missing or stale, then spawn `serviceCommand()`.
//
//   import { ensureBuild, serviceCommand } from "../scripts/ensure-build.js";
//   await ensureBuild();                                   // no-op when dist/ is up to date
//   const { command, args } = serviceCommand(["--cpu-prof"]);
//   spawn(command, args, { cwd: ROOT, env });              // ROOT: the checkout (cwd does not matter
//                                                          // to the service, but keeps .data/ etc. tidy)
//
// ensureBuild(): Promise<void> — rebuilds (esbuild, about a second) when scripts/build.mjs's
//   staleReason() says so (dist/ missing, or any bundled .ts, package.json or the lock file newer
//   than the build); concurrent callers in one process share one build.
// serviceCommand(nodeFlags?: string[]): { command, args } — `node RUNTIME_FLAGS [nodeFlags]
//   <root>/dist/server/main.js`, exactly what `npm start` runs (absolute path: any cwd works;
//   test/process/runtime.test.ts checks that package.json's start script uses the same flags).
import path from "node:path";
import { build, ENTRY, ROOT, staleReason } from "./build.mjs";

export { ENTRY as SERVICE_ENTRY, ROOT };

/**
 * The node flags of the production runtime (docs/decisions/performance.md, "Compiled runtime and memory flags"):
 * source maps for stack traces; 4 MiB semi-spaces (V8's default 16 MiB keeps 32 MiB of young
 * generation committed once a burst has grown it); Liftoff only for WebAssembly (Prisma's query
 * compiler runs on query-plan cache misses only; TurboFan tier-up of it held ~40 MiB of compiler
 * memory for nothing); a fixed old-generation growing factor of 1.5 (V8 otherwise lets old space grow
 * up to ~4× the live set before a full collection: 237 → 142 MiB peak under load, same CPU; a soft
 * knob, not a cap: a large live set still fits).
 */
export const RUNTIME_FLAGS = [
  "--enable-source-maps",
  "--max-semi-space-size=4",
  "--heap-growing-percent=50",
  "--liftoff-only",
];

let pending: Promise<void> | undefined;

export function ensureBuild(): Promise<void> {
  if (!staleReason()) return Promise.resolve();
  pending ??= build()
    .then(() => undefined)
    .finally(() => (pending = undefined));
  return pending;
}

export function serviceCommand(nodeFlags: string[] = []): { command: string; args: string[] } {
  return { command: process.execPath, args: [...RUNTIME_FLAGS, ...nodeFlags, ENTRY] };
}

/**
 * The operator's commands as package.json's scripts run them (built
 * entry points of scripts/build.mjs, the service's runtime flags).
 */
export const COMMANDS = {
  admin: "dist/server/admin/cli.js",
  "db:migrate": "dist/server/db/migrate-cli.js",
  "db:distribute": "dist/server/db/distribute-cli.js",
} as const;

/** `node RUNTIME_FLAGS <root>/<COMMANDS[name]> args…`: what `npm run --silent <name> -- args…` runs, without npm. */
export function commandLine(name: keyof typeof COMMANDS, args: string[] = []): { command: string; args: string[] } {
  return { command: process.execPath, args: [...RUNTIME_FLAGS, path.join(ROOT, COMMANDS[name]), ...args] };
}
