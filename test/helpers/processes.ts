// Service processes as an operator starts them (`npm start`, `npm run admin`, …) for the process
// tests (test/process/process-signals.test.ts, test/process/embedded-lock.test.ts, …): spawn, run to the end, wait
// until ready, the process tree under a pid (Linux /proc), free ports (a start retried on another one
// when its port was taken meanwhile) and whether a port is free.
import { spawn, type ChildProcess, type StdioOptions } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { createServer } from "node:net";
import path from "node:path";
import { commandLine, ensureBuild, ROOT } from "../../scripts/ensure-build.js";

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
    s.on("error", reject);
  });

/**
 * A start on a port free a moment ago, made again on another one when that port was taken before the
 * server bound it (its error's message says so: portTaken): see drills/lib/proc.ts.
 */
export { onFreePort, portTaken } from "../../drills/lib/proc.js";

/** `n` distinct ports, each free a moment ago (freePort() twice in a row can answer the same one). */
export async function freePorts(n: number): Promise<number[]> {
  const ports: number[] = [];
  while (ports.length < n) {
    const port = await freePort();
    if (!ports.includes(port)) ports.push(port);
  }
  return ports;
}

/** True when nothing listens on 127.0.0.1:port (binding it succeeds). */
export const portFree = (port: number) =>
  new Promise<boolean>((resolve) => {
    const s = createServer();
    s.once("error", () => resolve(false));
    s.listen(port, "127.0.0.1", () => s.close(() => resolve(true)));
  });

/** This process's environment without database, Redis, port or data-folder settings. */
export function baseEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const k of [
    "DATABASE_URL",
    "DIRECT_DATABASE_URL",
    "REDIS_URL",
    "REDIS_CLUSTER_NODES",
    "PGLITE_DATA_DIR",
    "METRICS_PORT",
    "PORT",
    "NO_DEMO",
    "LOG_FORMAT",
  ])
    delete env[k];
  for (const k of Object.keys(env)) if (k.startsWith("npm_")) delete env[k]; // as from a shell, not from `npm test`
  return { ...env, HOST: "127.0.0.1", LOG_LEVEL: "info" };
}

export interface Spawned {
  child: ChildProcess;
  out(): string;
  err(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>;
}

/** `npm <args>` in the checkout; stdout/stderr collected unless `stdio` says otherwise. */
export function spawnNpm(
  args: string[],
  env: NodeJS.ProcessEnv,
  stdio: StdioOptions = ["ignore", "pipe", "pipe"],
): Spawned {
  const child = spawn("npm", args, { cwd: ROOT, env, stdio });
  let out = "";
  let err = "";
  child.stdout?.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr?.on("data", (d: Buffer) => (err += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>((resolve) =>
    child.on("exit", (code, signal) => resolve({ code, signal, at: Date.now() })),
  );
  return { child, out: () => out, err: () => err, exited };
}

/**
 * `npm <args>` run to its end: the exit code and everything it wrote; `pids`, when given, gets its pid (for cleanup).
 */
export function runNpm(
  args: string[],
  env: NodeJS.ProcessEnv,
  opts: { cwd?: string; pids?: number[] } = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return run("npm", args, env, opts);
}

/** `command <args>` run to its end: the exit code and everything it wrote. */
function run(
  command: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  opts: { cwd?: string; pids?: number[] } = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: opts.cwd, env, stdio: ["ignore", "pipe", "pipe"] });
    opts.pids?.push(child.pid!);
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

/**
 * The admin CLI as `npm run --silent admin -- …` runs it (the built dist/server/admin/cli.js), without
 * npm in front: the tests of what the verbs say. test/process/admin-cli-pipe.test.ts and
 * test/process/operator.test.ts run it through npm itself.
 */
export async function runAdminCli(
  args: string[],
  env: NodeJS.ProcessEnv,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  await ensureBuild();
  const { command, args: argv } = commandLine("admin", args);
  return run(command, argv, env, { cwd: ROOT });
}

/**
 * A process that logs two lines through server/logger.ts (`createLogger(${loggerArgs})`) and exits,
 * its standard output closed before the first line: the exit code (or "still running after 10 s")
 * and its stderr. `pids` gets its pid (for cleanup).
 */
export async function logIntoClosedPipe(
  loggerArgs: string,
  pids: number[],
): Promise<{ exit: number | null | string; stderr: string }> {
  const script = `import { createLogger } from ${JSON.stringify(path.join(ROOT, "server/logger.ts"))};
      const logger = createLogger(${loggerArgs});
      setTimeout(() => { logger.info("one"); logger.info("two"); process.exit(0); }, 200);`;
  const child = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
    cwd: ROOT,
    stdio: ["ignore", "pipe", "pipe"],
  });
  pids.push(child.pid!);
  child.stdout.destroy(); // the reader is gone before the first line
  let stderr = "";
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  const exit = await Promise.race([
    new Promise<number | null>((r) => child.on("exit", (code) => r(code))),
    new Promise<string>((r) => setTimeout(() => r("still running after 10 s"), 10_000)),
  ]);
  return { exit, stderr };
}

/** Polls `url` until it answers 200 (or the process exits, or the time is up). */
export async function waitReady(url: string, s: Spawned, timeoutMs = 120_000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline && s.child.exitCode === null && s.child.signalCode === null) {
    if (
      await fetch(url).then(
        (r) => r.ok,
        () => false,
      )
    )
      return true;
    await sleep(200);
  }
  return false;
}

/** State letter of a process (R, S, Z …) or undefined when there is no such process. */
export function procState(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[0];
  } catch {
    return undefined;
  }
}

/** Running (not a zombie). */
export const running = (pid: number) => {
  const s = procState(pid);
  return s !== undefined && s !== "Z";
};

/** Every process under `pid` (children, grandchildren …), from /proc. */
export function descendants(pid: number): { pid: number; cmd: string }[] {
  const children = new Map<number, number[]>();
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(name)]);
    } catch {
      // gone meanwhile
    }
  }
  const out: { pid: number; cmd: string }[] = [];
  const walk = (p: number) => {
    for (const c of children.get(p) ?? []) {
      let cmd = "";
      try {
        cmd = readFileSync(`/proc/${c}/cmdline`, "utf8").replace(/\0/g, " ").trim();
      } catch {
        // gone meanwhile
      }
      out.push({ pid: c, cmd });
      walk(c);
    }
  };
  walk(pid);
  return out;
}

/** Waits until `check` holds (true) or the time is up; resolves with the last value. */
export async function until(
  check: () => boolean | Promise<boolean>,
  timeoutMs: number,
  stepMs = 100,
): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return true;
    if (Date.now() >= deadline) return false;
    await sleep(stepMs);
  }
}

/** Kills whatever is left of a test's processes (cleanup only). */
export function killAll(pids: number[]): void {
  for (const pid of pids)
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // gone
    }
}
