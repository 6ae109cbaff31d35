// The suite as vitest projects by group (test/legs.mjs): without CI_LEG, `npm test` runs unit,
// process and db on whatever backend the environment names; with CI_LEG, the projects of that leg,
// the `topology` one holding the test/db/ files that name one of the leg's topologies. With REPORT
// (.ci/run), the JSON report goes there and each file's times beside it (scripts/vitest-timing.ts).
import { readdirSync, readFileSync } from "node:fs";
import { defineConfig } from "vitest/config";
import { GROUPS, LEGS, topologiesOf } from "./test/legs.mjs";

const legName = process.env.CI_LEG;
const leg = legName ? LEGS[legName] : { groups: [...GROUPS], topologies: [] };
if (!leg) throw new Error(`CI_LEG=${legName}: no such leg in test/legs.mjs (${Object.keys(LEGS).join(", ")})`);

/** A file's `@topology` words; a malformed line stops the run, naming the file (test/legs.mjs). */
function topologiesOfFile(file: string): string[] {
  try {
    return topologiesOf(readFileSync(file, "utf8"));
  } catch (e) {
    throw new Error(`${file}: ${(e as Error).message}`);
  }
}

const topologyFiles = leg.topologies.length
  ? readdirSync("test/db")
      .filter((f) => f.endsWith(".test.ts") && topologiesOfFile(`test/db/${f}`).some((t) => leg.topologies.includes(t)))
      .map((f) => `test/db/${f}`)
  : [];

/** A project whose files share their worker's process. */
const SHARED = { isolate: false, setupFiles: ["test/helpers/shared-process.ts"] };

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: "forks",
    maxWorkers: 2,
    globalSetup: ["test/helpers/global-setup.ts"],
    ...(process.env.REPORT
      ? { reporters: ["default", "./scripts/vitest-timing.ts", "json"], outputFile: { json: process.env.REPORT } }
      : {}),
    // The database files share their worker's process (isolate: false): in a fresh process each file
    // paid for its imports (~1.8 s: the app, Prisma's client, PGlite, zod), for compiling PGlite's and
    // Prisma's WebAssembly and for warming the JIT again — the PGlite files' CPU halved without it
    // (measured: docs/decisions/operations.md, "CI's matrix"). They leave nothing behind that another
    // file could see: each starts its own app on its own database and closes both; the few spies and
    // fake clocks are restored where they are set; the service's module state that would carry over
    // is reset before each file (SHARED's setup file; test/helpers/module-state.ts lists that state and
    // test/unit/legs.test.ts checks the list). Unit and process files stay isolated (they mock, spawn
    // and change the environment).
    projects: [
      ...leg.groups.map((g) => ({
        extends: true as const,
        test: { name: g, include: [`test/${g}/**/*.test.ts`], ...(g === "db" ? SHARED : {}) },
      })),
      ...(topologyFiles.length
        ? [{ extends: true as const, test: { name: "topology", include: topologyFiles, ...SHARED } }]
        : []),
    ],
  },
});
