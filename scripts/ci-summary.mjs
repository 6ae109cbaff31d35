// CI's closing line: `tests: N passed, N failed[, N skipped]`, summed over every machine-readable
// result file given (vitest `--reporter=json` output, and drills/run.ts's DRILLS_JSON). A run that
// was expected but left no file (it crashed before reporting) counts as one failed test, so a
// missing report can never read as green.
import { existsSync, readFileSync } from "node:fs";

let passed = 0;
let failed = 0;
let skipped = 0;
for (const file of process.argv.slice(2)) {
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
    // A suite that failed to load has no tests in it but is a failure.
    if (typeof r.numFailedTestSuites === "number" && r.numFailedTestSuites > 0 && (r.numFailedTests ?? 0) === 0) failed += r.numFailedTestSuites;
  } catch (e) {
    process.stderr.write(`ci-summary: ${file} unreadable (${e.message}): counted as 1 failed\n`);
    failed += 1;
  }
}
process.stdout.write(`tests: ${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ""}\n`);
