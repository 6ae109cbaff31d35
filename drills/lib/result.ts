// What a drill reports: the counts the runner prints on its line, and every missed target.
import { leakCount, leaksSince } from "./observe.js";
import type { Tally } from "./http.js";
import type { Scope } from "./scope.js";

export interface DrillResult {
  requests: number;
  /** Missed targets and unexpected answers. */
  failures: number;
  /** 5xx answers that the drill's documented behaviour does not allow. */
  fiveXX: number;
  /** Secrets or stack traces in responses/logs, cross-tenant reads or writes. */
  leaks: number;
  /** Seconds until the service served again after the dependency returned (null: not applicable). */
  recoverySeconds: number | null;
  /** Extra figures for the line (p99s, 503 counts …). */
  figures: string[];
  problems: string[];
}

export interface Drill {
  id: number;
  name: string;
  /** Seconds the runner allows this drill (default 300; DRILL_TIMEOUT_S overrides every drill's). */
  timeoutS?: number;
  run(ctx: DrillContext): Promise<DrillResult>;
}

export interface DrillContext {
  /** Multiplies request counts and load durations (DRILL_SCALE, default 1). */
  scale: number;
  /** Resources of this drill, cleaned up by the runner whatever happens. */
  scope: Scope;
  log(msg: string): void;
}

/** Collects a drill's figures and problems as it goes. */
export class Report {
  readonly problems: string[] = [];
  readonly figures: string[] = [];
  leaks = 0;
  recoverySeconds: number | null = null;
  private readonly leakMark = leakCount();

  constructor(readonly tallies: Tally[]) {}

  /** Records a missed target unless ok. */
  check(ok: boolean, problem: string): boolean {
    if (!ok) this.problems.push(problem);
    return ok;
  }

  fail(problem: string): void {
    this.problems.push(problem);
  }

  figure(f: string): void {
    this.figures.push(f);
  }

  result(opts: { allowed5xx?: number } = {}): DrillResult {
    const failures = this.problems.length;
    const responseLeaks = leaksSince(this.leakMark);
    for (const l of responseLeaks.slice(0, 5)) this.problems.push(`leak: ${l.what} (${l.where})`);
    const requests = this.tallies.reduce((n, t) => n + t.requests, 0);
    const fiveXX = this.tallies.reduce((n, t) => n + t.fiveXX, 0) - (opts.allowed5xx ?? 0);
    return {
      requests,
      failures,
      fiveXX,
      leaks: this.leaks + responseLeaks.length,
      recoverySeconds: this.recoverySeconds,
      figures: this.figures,
      problems: this.problems,
    };
  }
}
