// CI's closing line: exactly `tests: N passed, N failed`, summed over every machine-readable
// result file given (vitest `--reporter=json` output, and drills/run.ts's DRILLS_JSON). A run that
// was expected but left no file (it crashed before reporting) counts as one failed test, so a
// missing report can never read as green. It is the only line of a CI log in that form.
//   node scripts/ci-summary.mjs FILE...     the closing line (failed tests named above it)
//   node scripts/ci-summary.mjs --leg FILE  one leg's counts, worded unlike the closing line:
//                                           `   leg pglite: 813 succeeded, 0 unsuccessful, 19 skipped`,
//                                           then its ten slowest files (FILE's sibling .times.json,
//                                           scripts/vitest-timing.ts; for the drills, each drill's
//                                           seconds); exits 1 when the leg skipped more
//                                           tests than its maxSkipped in test/legs.mjs (a leg whose
//                                           backend went missing skips that backend's tests)
import { existsSync, readFileSync } from "node:fs";
import { LEGS } from "../test/legs.mjs";

const legMode = process.argv[2] === "--leg";
const files = process.argv.slice(legMode ? 3 : 2);

let passed = 0;
let failed = 0;
let skipped = 0;
// Failed tests are named just above the closing line, so the tail of a CI log says what failed.
const failures = [];
for (const file of files) {
  if (!existsSync(file)) {
    process.stderr.write(`ci-summary: ${file} missing (the run did not report): counted as 1 failed\n`);
    failed += 1;
    continue;
  }
  try {
    const r = JSON.parse(readFileSync(file, "utf8"));
    passed += r.numPassedTests ?? 0;
    failed += r.numFailedTests ?? 0;
    skipped += (r.numPendingTests ?? 0) + (r.numTodoTests ?? 0);
    const leg = file.replace(/^.*\//, "").replace(/\.json$/, "");
    for (const suite of r.testResults ?? []) {
      const path = String(suite.name ?? "").replace(/^.*?\/(test|drills)\//, "$1/");
      const failedTests = (suite.assertionResults ?? []).filter((t) => t.status === "failed");
      for (const t of failedTests) {
        const why = String((t.failureMessages ?? [])[0] ?? "")
          .split("\n")[0]
          .slice(0, 300);
        failures.push(`FAILED [${leg}] ${path} > ${t.fullName ?? t.title}: ${why}`);
      }
      if (suite.status === "failed" && failedTests.length === 0) {
        // vitest's JSON has no message for a failed hook (beforeAll): the step's log above has it.
        const why =
          String(suite.message ?? "")
            .split("\n")[0]
            .slice(0, 300) || "the file failed outside its tests (a hook: its error is in the step's log above)";
        failures.push(`FAILED [${leg}] ${path}: ${why}`);
      }
    }
    // A suite that failed to load has no tests in it but is a failure.
    if (typeof r.numFailedTestSuites === "number" && r.numFailedTestSuites > 0 && (r.numFailedTests ?? 0) === 0)
      failed += r.numFailedTestSuites;
  } catch (e) {
    process.stderr.write(`ci-summary: ${file} unreadable (${e.message}): counted as 1 failed\n`);
    failed += 1;
  }
}
if (legMode) {
  const leg = (files[0] ?? "").replace(/^.*\//, "").replace(/\.json$/, "");
  process.stdout.write(`   leg ${leg}: ${passed} succeeded, ${failed} unsuccessful, ${skipped} skipped\n`);
  // The drills' report (drills/run.ts DRILLS_JSON) has one line per drill ending in its seconds.
  let drillLines = [];
  try {
    drillLines = JSON.parse(readFileSync(files[0] ?? "", "utf8")).lines ?? [];
  } catch {}
  if (drillLines.length) {
    process.stdout.write(`   drills (s):\n`);
    for (const line of drillLines) {
      const [, id, name] = /^drill (\d+(?: #\d+)?) (.{18})/.exec(line) ?? [];
      const [, secs, verdict] = /\| ([\d.]+)s (PASS|FAIL)$/.exec(line) ?? [];
      process.stdout.write(
        `   ${String(secs ?? "?").padStart(6)}  drill ${id ?? "?"} ${(name ?? "").trim()} ${verdict ?? ""}\n`,
      );
    }
  }
  const timesFile = (files[0] ?? "").replace(/\.json$/, ".times.json");
  if (existsSync(timesFile)) {
    const times = JSON.parse(readFileSync(timesFile, "utf8")).files ?? [];
    const total = (f) => f.collectMs + f.prepareMs + f.testsMs;
    const sec = (ms) => (ms / 1000).toFixed(1).padStart(6);
    process.stdout.write(`   slowest files (s: total = import + set-up + tests and hooks):\n`);
    for (const f of [...times].sort((a, b) => total(b) - total(a)).slice(0, 10))
      process.stdout.write(
        `   ${sec(total(f))} = ${sec(f.collectMs)} + ${sec(f.prepareMs)} + ${sec(f.testsMs)}  ${f.file}\n`,
      );
  }
  const ceiling = LEGS[leg]?.maxSkipped;
  if (ceiling !== undefined && skipped > ceiling) {
    process.stdout.write(
      `   leg ${leg} skipped ${skipped} tests, more than its ceiling of ` +
        `${ceiling} (test/legs.mjs): is its backend there?\n`,
    );
    process.exit(1);
  }
  process.exit(0);
}
for (const line of failures.slice(0, 40)) process.stdout.write(`${line}\n`);
if (failures.length > 40) process.stdout.write(`... and ${failures.length - 40} more failures\n`);
if (skipped) process.stdout.write(`skipped tests (not counted): ${skipped}\n`);
process.stdout.write(`tests: ${passed} passed, ${failed} failed\n`);
