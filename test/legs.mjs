// What each CI leg runs (.ci/run; docs/decisions/operations.md, "CI's matrix"). Every test file sits
// in one group, by what it depends on, shown by its folder:
//   test/unit/     pure logic and tooling: no database, no service process; the same on every backend
//   test/process/  spawned processes and the embedded default (npm start, the admin CLI, signals,
//                  start-up errors, the docs page, the README's examples): embedded and PostgreSQL
//   test/db/       behaviour over a database: PGlite, PostgreSQL and Citus. A new file lands here.
// A file of test/db/ whose behaviour a topology can change names it in a line of its header,
// `// @topology pooler redis citus` (any of them), and the topology legs run exactly those files:
//   pooler  connections, prepared statements, SET/timeouts and transactions behind PgBouncer
//   redis   quotas on a Redis Cluster
//   citus   the other DATABASE_ROUTING on a Citus cluster (the citus leg runs all of test/db/ with
//           DATABASE_ROUTING=workers; citus-coordinator runs these files with the default routing)
// vitest.config.ts builds a leg's projects from CI_LEG (none set: unit, process and db, the README's
// `npm test`; a topology leg stops at a malformed `@topology` line, topologiesOf below);
// test/unit/legs.test.ts fails when a file is in no group, a `@topology` line does not read, a group
// or topology no leg runs, a leg selects nothing, or .ci/run and this table disagree;
// test/db/leg.test.ts asserts, in each leg, the backend the leg claims. scripts/ci-summary.mjs fails a
// leg that skipped more than its `maxSkipped` (a leg whose backend went missing skips its backend's tests).
// Plain JavaScript: read by vitest.config.ts, the guard test and scripts/ci-summary.mjs alike.

/** @typedef {"unit" | "process" | "db"} Group */
/** @typedef {"pooler" | "redis" | "citus"} Topology */
/** @typedef {{ groups: Group[]; topologies: Topology[]; maxSkipped: number; what: string }} Leg */

export const GROUPS = /** @type {const} */ (["unit", "process", "db"]);
export const TOPOLOGIES = /** @type {const} */ (["pooler", "redis", "citus"]);

/** @type {Record<string, Leg>} */
export const LEGS = {
  unit: { groups: ["unit"], topologies: [], maxSkipped: 0, what: "pure logic and tooling, once" },
  pglite: {
    groups: ["process", "db"],
    topologies: [],
    // The PostgreSQL-only tests (a second connection, held locks and transactions: forced races, the
    // polling recipe's late commits) skip here: one connection; and those that need Redis (wake-ups
    // across instances, Redis lost during waits, the admin CLI's wake-ups).
    maxSkipped: 85,
    what: "the embedded defaults: PGlite, in-process rate limits",
  },
  // The embedded database's own tests skip here (the lock, start lines, Studio over its SQL socket).
  postgres: { groups: ["process", "db"], topologies: [], maxSkipped: 48, what: "PostgreSQL and Redis" },
  pgbouncer: {
    groups: [],
    topologies: ["pooler"],
    maxSkipped: 12,
    what: "PgBouncer 1.18 in transaction mode, statement_timeout as a startup parameter",
  },
  "pgbouncer-refusing+redis-cluster": {
    groups: [],
    topologies: ["pooler", "redis"],
    maxSkipped: 12,
    what:
      "a PgBouncer that refuses the statement_timeout startup parameter (SET LOCAL), quotas on a 3-master Redis " +
      "Cluster",
  },
  citus: {
    groups: ["db"],
    topologies: [],
    maxSkipped: 12,
    what: "a Citus cluster (coordinator + 2 workers), DATABASE_ROUTING=workers",
  },
  "citus-coordinator": {
    groups: [],
    topologies: ["citus"],
    maxSkipped: 6,
    what: "the same Citus cluster, every statement through the coordinator",
  },
};

/**
 * The `@topology` names in a test file's text (none: no such line). Throws on a line that mentions
 * `@topology` in any other form — a misspelt or unknown word, a second line, another comment style —
 * so that a typo fails the run (vitest.config.ts, test/unit/legs.test.ts) instead of dropping the file
 * from its legs.
 */
export function topologiesOf(text) {
  // A comment line that starts with `@topology`, or with a word a typo away from it (`@topolgy`).
  const lines = text.split("\n").filter((l) => {
    const word = /^\s*(?:\/\/|\/\*|\*)\s*@\s*([A-Za-z]+)/.exec(l)?.[1]?.toLowerCase();
    return word !== undefined && (word.startsWith("topolog") || distance(word, "topology") <= 2);
  });
  if (lines.length === 0) return [];
  const words = /^\/\/ @topology ([a-z]+(?: [a-z]+)*)\s*$/.exec(lines.length === 1 ? lines[0] : "")?.[1].split(" ");
  const unknown = words?.filter((w) => !TOPOLOGIES.includes(w)) ?? [];
  if (!words || unknown.length || new Set(words).size !== words.length) {
    const found = lines.map((l) => JSON.stringify(l.trim())).join(", ");
    throw new Error(
      `a @topology line must be one line \`// @topology ${TOPOLOGIES.join(" ")}\` (any of them, each once)` +
        `${unknown.length ? `: unknown ${unknown.join(", ")}` : ""}; found ${found}`,
    );
  }
  return words;
}

/** Levenshtein distance between two short words. */
function distance(a, b) {
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) {
      next[j] = Math.min(row[j] + 1, next[j - 1] + 1, row[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    row = next;
  }
  return row[b.length];
}
