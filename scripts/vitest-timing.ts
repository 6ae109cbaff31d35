// A vitest reporter that writes each test file's wall time, split as vitest measures it (import and
// suite collection, harness set-up, tests and hooks), beside the JSON report: REPORT's name with
// .times.json (vitest.config.ts). ci-summary --leg prints a leg's slowest files from it (CI's log:
// where a leg's time goes).
import { writeFileSync } from "node:fs";
import { relative } from "node:path";
import type { Reporter, TestModule } from "vitest/node";

export default class TimingReporter implements Reporter {
  onTestRunEnd(modules: ReadonlyArray<TestModule>) {
    const report = process.env.REPORT;
    if (!report) return;
    const out = `${report.replace(/\.json$/, "")}.times.json`;
    const files = modules.map((m) => {
      const d = m.diagnostic();
      return {
        file: relative(process.cwd(), m.moduleId),
        project: m.project.name,
        collectMs: Math.round(d.collectDuration),
        prepareMs: Math.round(d.prepareDuration + d.environmentSetupDuration + d.setupDuration),
        testsMs: Math.round(d.duration),
      };
    });
    writeFileSync(out, JSON.stringify({ files }, null, 1));
  }
}
