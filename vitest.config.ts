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

const topologyFiles = leg.topologies.length
  ? readdirSync("test/db")
      .filter((f) => f.endsWith(".test.ts") && topologiesOf(readFileSync(`test/db/${f}`, "utf8")).some((t) => leg.topologies.includes(t)))
      .map((f) => `test/db/${f}`)
  : [];

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
    projects: [
      ...leg.groups.map((g) => ({ extends: true as const, test: { name: g, include: [`test/${g}/**/*.test.ts`] } })),
      ...(topologyFiles.length ? [{ extends: true as const, test: { name: "topology", include: topologyFiles } }] : []),
    ],
  },
});
