// Module state of the service's code (server/, routers/, rest/, model/) that a database test file
// could leave behind for the next: the test/db/ files share their vitest worker's process
// (vitest.config.ts isolate: false), so a module's top-level variables outlive the file that set them.
// test/unit/legs.test.ts finds every such binding (moduleState below) and fails on one that is not in
// MODULE_STATE, each with what makes it safe: reset between files (test/helpers/shared-process.ts,
// a setup file of every shared-process project), or kept, with the reason. A WeakMap or WeakSet is
// not listed: its entries belong to their keys (a request, a Database, a runner), which no other
// file holds.

/** Every module-level mutable binding of the service, as `<file> <name>`, and why it is safe. */
export const MODULE_STATE: Record<string, string> = {
  // Read once per process from whichever database the process met first: another file's database
  // (another schema: a test that altered a table, an older migration) would be served stale types.
  "server/db/insert.ts typeCache": "reset: forgetColumnTypes()",
  "server/bootstrap.ts emptyWritesRerun": "kept: a counter for /metrics, read as a difference (split-writes.test.ts)",
  "server/db/client.ts queriesSent": "kept: the benchmark's statement count, only with countQueries (no test sets it)",
  "server/db/client.ts countTold": "kept: its SIGUSR2 handler, installed once per process with countQueries",
  "server/db/pglite-lock.ts held": "kept: the folders held, each removed as its database closes (memory:// takes none)",
  "server/db/pglite-lock.ts exitHook": "kept: the exit hook that releases them, installed once per process",
  "server/lifecycle.ts stopping": "kept: set by server/main.ts's shutdown alone (no test/db file calls startStopping)",
  "server/logger.ts stdout": "kept: the process's one standard-output destination",
  "server/secrets.ts cached": "kept: keyed by the configured URLs it was computed from (recomputed when they differ)",
  "server/main.ts tenants": "kept: the service's entry point, never imported by a test",
  "server/main.ts inProgress": "kept: the service's entry point, never imported by a test",
  "server/db/migrate-cli.ts db": "kept: the migrator's entry point, never imported by a test",
  "routers/_lib/counters.ts warned": "kept: a warning once per filter and process; setOnUncounted (tests) clears it",
  "routers/_lib/counters.ts onUncounted": "kept: replaced by setOnUncounted and restored where a test sets it",
};

/** Entry points: modules that run a process when imported (no test may import them). */
export const ENTRY_POINTS = ["server/main.ts", "server/db/migrate-cli.ts"];

const MUTATES = (name: string) => {
  const n = name.replace(/\$/g, "\\$");
  const method = `\\.(?:set|add|delete|clear|push|pop|shift|unshift|splice)\\(`;
  const property = `\\.[\\w$]+\\s*(?:[-+*/]?=(?!=)|\\+\\+|--)`;
  const element = `\\[[^\\]]+\\]\\s*=(?!=)`;
  return new RegExp(`\\b${n}(?:${method}|${property}|${element})`);
};

/**
 * The module-level mutable bindings of a module's text: every top-level `let`/`var`, and every
 * top-level `const` Map, Set, LRUCache, array or object literal that the module changes (a method that
 * changes it, a property or element assigned). Not closures' variables, nor a WeakMap or WeakSet.
 */
export function moduleState(text: string): string[] {
  const names: string[] = [];
  for (const m of text.matchAll(/^(?:export )?(?:let|var) ([A-Za-z_$][\w$]*)/gm)) names.push(m[1]!);
  const changeable = /^(?:export )?const ([A-Za-z_$][\w$]*)\b[^=\n]*=\s*(?:new (?:Map|Set|LRUCache)\b|\[|\{)/gm;
  for (const m of text.matchAll(changeable)) if (MUTATES(m[1]!).test(text)) names.push(m[1]!);
  return names;
}
