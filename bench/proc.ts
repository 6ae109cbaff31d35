// Child processes of the benchmark (the service and the baseline) and what is read off them:
// readiness, resident memory (/proc/<pid>/status), CPU time (/proc/<pid>/stat) and the statement
// counter that BENCH_COUNT_QUERIES=1 enables (SIGUSR2 → "bench:queries N" on stderr).
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { ensureBuild, ROOT, serviceCommand as compiledServiceCommand } from "../scripts/ensure-build.js";
import { setTimeout as sleep } from "node:timers/promises";

const TICK = 100; // USER_HZ on Linux

export interface Proc {
  name: string;
  child: ChildProcess;
  pid: number;
  url: string;
  /** The statements counted so far (BENCH_COUNT_QUERIES=1). */
  queries(): Promise<number>;
  stop(): Promise<void>;
  stderrTail(): string;
}

export function startProcess(opts: {
  name: string;
  args: string[];
  env: NodeJS.ProcessEnv;
  port: number;
  cwd: string;
}): Proc {
  const child = spawn(process.execPath, opts.args, { cwd: opts.cwd, env: opts.env, stdio: ["ignore", "pipe", "pipe"] });
  let tail = "";
  let buf = "";
  const waiters: ((n: number) => void)[] = [];
  child.stdout!.on("data", (d: Buffer) => (tail = (tail + d.toString()).slice(-4000)));
  child.stderr!.on("data", (d: Buffer) => {
    buf += d.toString();
    for (let i = buf.indexOf("\n"); i >= 0; i = buf.indexOf("\n")) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      const m = /^bench:queries (\d+)$/.exec(line);
      if (m) waiters.shift()?.(Number(m[1]));
      else tail = `${tail}${line}\n`.slice(-4000);
    }
  });
  let exited = false;
  const exit = new Promise<void>((r) =>
    child.on("exit", () => {
      exited = true;
      r();
    }),
  );
  return {
    name: opts.name,
    child,
    pid: child.pid!,
    url: `http://127.0.0.1:${opts.port}`,
    queries: () =>
      new Promise<number>((resolve, reject) => {
        const t = setTimeout(
          () => reject(new Error(`${opts.name}: no query count in 60 s (is BENCH_COUNT_QUERIES=1 honoured?)`)),
          60_000,
        );
        waiters.push((n) => {
          clearTimeout(t);
          resolve(n);
        });
        child.kill("SIGUSR2");
      }),
    async stop() {
      if (exited) return;
      child.kill("SIGTERM");
      await Promise.race([exit, sleep(15_000)]);
      if (!exited) child.kill("SIGKILL");
    },
    stderrTail: () => tail,
  };
}

export async function waitReady(p: Proc, path: string, timeoutMs = 60_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    if (p.child.exitCode !== null) throw new Error(`${p.name} exited (${p.child.exitCode}):\n${p.stderrTail()}`);
    try {
      const r = await fetch(p.url + path);
      if (r.ok) return;
    } catch {
      /* not listening yet */
    }
    await sleep(200);
  }
  throw new Error(`${p.name} not ready after ${timeoutMs} ms:\n${p.stderrTail()}`);
}

/** VmRSS and VmHWM (peak) in MiB. */
export function memory(pid: number): { rss: number; hwm: number } {
  try {
    const s = readFileSync(`/proc/${pid}/status`, "utf8");
    const kb = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+) kB`, "m").exec(s)?.[1] ?? 0);
    return { rss: kb("VmRSS") / 1024, hwm: kb("VmHWM") / 1024 };
  } catch {
    return { rss: 0, hwm: 0 };
  }
}

/** User + system CPU seconds of a process (0 when it is gone). */
export function cpuSeconds(pid: number): number {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, "utf8");
    const f = s.slice(s.lastIndexOf(")") + 2).split(" ");
    return (Number(f[11]) + Number(f[12])) / TICK;
  } catch {
    return 0;
  }
}

/** Samples a process's resident memory while a run lasts; returns the highest VmRSS seen (MiB). */
export function rssSampler(pid: number, everyMs = 200) {
  let max = memory(pid).rss;
  const t = setInterval(() => (max = Math.max(max, memory(pid).rss)), everyMs);
  return {
    stop(): number {
      clearInterval(t);
      return Math.max(max, memory(pid).rss);
    },
  };
}

/**
 * How the benchmark runs the service: what `npm start` runs (scripts/ensure-build.ts, the one place
 * that decides it for the drills, the benchmark and the runtime test) — the compiled bundle with the
 * production runtime flags, built first when dist/ is missing or stale.
 */
export async function serviceCommand(
  log: (s: string) => void = () => {},
  nodeFlags: string[] = [],
): Promise<{ args: string[]; label: string }> {
  log("build dist/ if stale (scripts/ensure-build.ts)");
  await ensureBuild();
  // Extra flags (BENCH_NODE_FLAGS, --cpu-prof) come after the runtime's own, so that they override them.
  const { args } = compiledServiceCommand(nodeFlags);
  // The label names paths relative to the checkout: a report carries no machine's folders.
  return {
    args,
    label: `node ${args.map((a) => (path.isAbsolute(a) ? path.relative(ROOT, a) : a)).join(" ")} (compiled: what npm start runs)`,
  };
}
