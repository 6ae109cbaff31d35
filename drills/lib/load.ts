// Steady background load for the outage drills: N workers issuing requests back to back over a set
// of clients until stopped, every answer kept with its start time for per-phase analysis.
import type { Client, ReqOpts, Res } from "./http.js";
import { sleep } from "./scope.js";

export interface Step {
  method: string;
  path: string;
  opts?: ReqOpts;
  /** Called with the answer (e.g. to remember an acknowledged write). */
  after?: (res: Res) => void;
  kind: string;
}

export interface LoadSample {
  res: Res;
  kind: string;
  client: number;
}

export class SteadyLoad {
  readonly samples: LoadSample[] = [];
  private running = true;
  private readonly done: Promise<void>;

  constructor(
    clients: Client[],
    workers: number,
    next: (n: number) => Step,
    opts: { pauseMs?: number; maxRequests?: number } = {},
  ) {
    let n = 0;
    this.done = Promise.all(
      Array.from({ length: workers }, async (_, w) => {
        let i = w;
        while (this.running && n < (opts.maxRequests ?? 100_000)) {
          const step = next(n++);
          const c = i++ % clients.length;
          const res = await clients[c]!.request(step.method, step.path, step.opts);
          step.after?.(res);
          this.samples.push({ res, kind: step.kind, client: c });
          if (opts.pauseMs) await sleep(opts.pauseMs);
        }
      }),
    ).then(() => {});
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.done;
  }

  between(from: number, to: number): LoadSample[] {
    return this.samples.filter((s) => s.res.startedAt >= from && s.res.startedAt < to);
  }
}

export interface ProbeSample {
  at: number;
  client: number;
  status: number;
  body: any;
}

/** Polls GET path on every client every intervalMs (e.g. /readyz). */
export class Poller {
  readonly samples: ProbeSample[] = [];
  private running = true;
  private readonly done: Promise<void>;

  constructor(clients: Client[], path: string, intervalMs = 200) {
    this.done = Promise.all(
      clients.map(async (c, i) => {
        while (this.running) {
          const at = Date.now();
          const r = await c.request("GET", path, { timeoutMs: 5000 });
          this.samples.push({ at, client: i, status: r.status, body: r.body });
          await sleep(Math.max(0, intervalMs - (Date.now() - at)));
        }
      }),
    ).then(() => {});
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.done;
  }
}
