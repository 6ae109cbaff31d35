// `npm run drills [-- IDS or NAMES...]`: runs the reliability and security drills (issue 9) and the
// scale drill (issue 14) one after the other, each with its own service processes (and its own
// PostgreSQL/Redis/PgBouncer where it breaks them), prints one line per drill with its counts, and
// exits non-zero when any target is missed. A drill is selected by number or by name:
// `npm run drills -- scale`, `npm run drills -- 2 postgres`. `--repeat N` runs the selection N times
// in a row (one line per drill and run; any failing run fails the whole): `npm run drills -- citus --repeat 10`.
//
// Environment: DRILL_SCALE (default 1; multiplies load durations and counts), DRILL_FUZZ_COUNT
// (default 10000), DRILL_FUZZ_SEED (default: derived from the commit), DRILL_REDIS_OUTAGE_S (20), DRILL_PG_OUTAGE_S
// (5), DRILL_LOG_LEVEL (debug), DRILL_TIMEOUT_S (per drill; default each drill's timeoutS, else 300),
// DRILL_CITUS_KEEP (1: drill 10 keeps its cluster's folder, data and server logs, for a post-mortem).
import { writeFileSync } from "node:fs";
import { drill1 } from "./drill1-instances.js";
import { drill2 } from "./drill2-redis.js";
import { drill3 } from "./drill3-postgres.js";
import { drill4 } from "./drill4-providers.js";
import { drill5 } from "./drill5-shutdown.js";
import { drill6 } from "./drill6-fuzz.js";
import { drill7 } from "./drill7-tenants.js";
import { drill8 } from "./drill8-secrets.js";
import { drill9 } from "./drill9-scale.js";
import { drill10 } from "./drill10-citus.js";
import type { Drill, DrillResult } from "./lib/result.js";
import { closeAllScopes, Scope } from "./lib/scope.js";

const DRILLS: Drill[] = [drill1, drill2, drill3, drill4, drill5, drill6, drill7, drill8, drill9, drill10];
const NAMES: Record<string, number> = {
  instances: 1,
  redis: 2,
  postgres: 3,
  providers: 4,
  shutdown: 5,
  fuzz: 6,
  tenants: 7,
  secrets: 8,
  scale: 9,
  citus: 10,
};

const scale = Number(process.env.DRILL_SCALE || 1);
const timeoutOf = (d: Drill) => Number(process.env.DRILL_TIMEOUT_S || d.timeoutS || 300) * 1000;
const argv = process.argv.slice(2);
const repeatAt = argv.findIndex((a) => a === "--repeat" || a.startsWith("--repeat="));
const repeatValue =
  repeatAt < 0 ? "1" : argv[repeatAt]!.includes("=") ? argv[repeatAt]!.split("=")[1] : argv[repeatAt + 1];
const repeat = Number(repeatValue);
if (!Number.isInteger(repeat) || repeat < 1 || repeat > 100) {
  process.stderr.write(`--repeat wants a whole number from 1 to 100, got "${repeatValue ?? ""}"\n`);
  process.exit(2);
}
const args =
  repeatAt < 0
    ? argv
    : argv.filter((_, i) => i !== repeatAt && !(i === repeatAt + 1 && !argv[repeatAt]!.includes("=")));
const unknown = args.filter((a) => !(a in NAMES) && !DRILLS.some((d) => String(d.id) === a));
if (unknown.length) {
  process.stderr.write(
    `unknown drill ${unknown.join(", ")}; drills: ${Object.entries(NAMES)
      .map(([n, id]) => `${id} ${n}`)
      .join(", ")}\n`,
  );
  process.exit(2);
}
const wanted = args.map((a) => NAMES[a] ?? Number(a));
const selected = wanted.length ? DRILLS.filter((d) => wanted.includes(d.id)) : DRILLS;

let interrupted = false;
for (const sig of ["SIGINT", "SIGTERM"] as const)
  process.on(sig, () => {
    if (interrupted) process.exit(130);
    interrupted = true;
    process.stderr.write(`\n${sig}: cleaning up\n`);
    void closeAllScopes().finally(() => process.exit(130));
  });

const fmt = (r: DrillResult) =>
  `requests=${r.requests} failures=${r.failures} 5xx=${r.fiveXX} leaks=${r.leaks} recovery=${r.recoverySeconds === null ? "-" : `${r.recoverySeconds.toFixed(2)}s`}`;

let failed = 0;
const lines: string[] = [];
const started = Date.now();
const runs = Array.from({ length: repeat }, (_, r) => selected.map((d) => ({ d, r }))).flat();
for (const { d, r } of runs) {
  const scope = new Scope(`drill${d.id}`);
  const t0 = Date.now();
  const log = (msg: string) => process.stderr.write(`  [drill ${d.id}] ${msg}\n`);
  process.stderr.write(`== drill ${d.id}: ${d.name}\n`);
  let result: DrillResult;
  let timer: NodeJS.Timeout | undefined;
  const perDrillTimeout = timeoutOf(d);
  try {
    result = await Promise.race([
      d.run({ scale, scope, log }),
      new Promise<never>(
        (_, rej) =>
          (timer = setTimeout(() => rej(new Error(`drill exceeded ${perDrillTimeout / 1000} s`)), perDrillTimeout)),
      ),
    ]);
  } catch (e) {
    result = {
      requests: 0,
      failures: 1,
      fiveXX: 0,
      leaks: 0,
      recoverySeconds: null,
      figures: [],
      problems: [`aborted: ${(e as Error).stack ?? e}`],
    };
  } finally {
    clearTimeout(timer);
  }
  for (const p of await scope.close()) result.problems.push(p);
  const ok = result.failures === 0 && result.fiveXX === 0 && result.leaks === 0 && result.problems.length === 0;
  if (!ok) failed += 1;
  const secs = ((Date.now() - t0) / 1000).toFixed(1);
  const line = `drill ${d.id}${repeat > 1 ? ` #${r + 1}` : ""} ${d.name.padEnd(18)} ${fmt(result)} | ${result.figures.join("; ")} | ${secs}s ${ok ? "PASS" : "FAIL"}`;
  lines.push(line);
  process.stdout.write(`${line}\n`);
  for (const p of result.problems.slice(0, 12)) process.stdout.write(`    - ${p}\n`);
  if (result.problems.length > 12) process.stdout.write(`    - … and ${result.problems.length - 12} more\n`);
}
process.stdout.write(
  `\n${runs.length} drill runs in ${((Date.now() - started) / 1000).toFixed(0)} s\ndrills: ${lines.length - failed} passed, ${failed} failed\n`,
);
// Machine-readable result for CI's closing `tests:` line (scripts/ci-summary.mjs): DRILLS_JSON=FILE.
if (process.env.DRILLS_JSON)
  writeFileSync(
    process.env.DRILLS_JSON,
    JSON.stringify({ numPassedTests: lines.length - failed, numFailedTests: failed, numPendingTests: 0, lines }),
  );
// Exit once stdout has drained (a pipe would otherwise cut the output).
process.stdout.write("", () => process.exit(failed ? 1 : 0));
