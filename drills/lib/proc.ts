// Child processes and ports for the drills.
import { spawn, type ChildProcess, type SpawnOptions } from "node:child_process";
import { createServer } from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/** A TCP port that was free a moment ago on 127.0.0.1. */
export async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r, j) => {
    s.once("error", j);
    s.listen(0, "127.0.0.1", () => r());
  });
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

/**
 * Whether a start failed because its port was taken: another process bound it between freePort()
 * closing its probe and the server binding it (node's EADDRINUSE, PostgreSQL's, Redis's and
 * PgBouncer's "Address already in use", the service's "port N is already in use").
 */
export const portTaken = (text: string) => /EADDRINUSE|address already in use|port \d+ is already in use/i.test(text);

/**
 * Starts something on a port that was free a moment ago (freePort), and again on another one when the
 * start failed because that port was taken meanwhile (its error's message says so: portTaken), up to
 * `attempts` times. `start` must fail with the server's own words (its output or log) in the message.
 */
export async function onFreePort<T>(start: (port: number) => Promise<T>, attempts = 5): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    try {
      return await start(port);
    } catch (err) {
      if (attempt >= attempts || !portTaken(String((err as Error)?.message ?? err))) throw err;
    }
  }
}

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a command to completion (bounded by timeoutMs) and returns its output. */
export function run(cmd: string, args: string[], opts: SpawnOptions & { timeoutMs?: number } = {}): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ["ignore", "pipe", "pipe"], ...opts });
    let stdout = "";
    let stderr = "";
    child.stdout?.on("data", (d) => (stdout += d));
    child.stderr?.on("data", (d) => (stderr += d));
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`${cmd} ${args.join(" ")}: timed out after ${opts.timeoutMs} ms`));
    }, opts.timeoutMs ?? 60_000);
    child.on("error", (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** Runs a command and fails when it exits non-zero. */
export async function runOk(
  cmd: string,
  args: string[],
  opts: SpawnOptions & { timeoutMs?: number } = {},
): Promise<RunResult> {
  const r = await run(cmd, args, opts);
  if (r.code !== 0)
    throw new Error(`${cmd} ${args.join(" ")} exited ${r.code}: ${(r.stderr || r.stdout).trim().slice(0, 500)}`);
  return r;
}

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
  at: number;
}

/** A promise for the child's exit (resolves at once if it already exited). */
export function exitOf(child: ChildProcess): Promise<Exit> {
  if (child.exitCode !== null || child.signalCode !== null)
    return Promise.resolve({ code: child.exitCode, signal: child.signalCode, at: Date.now() });
  return new Promise((r) => child.once("exit", (code, signal) => r({ code, signal, at: Date.now() })));
}

/**
 * Stops a child: `signal` unless it already exited, SIGKILL if it is still running `killAfterMs`
 * later; resolves with its exit.
 */
export async function terminate(
  child: ChildProcess,
  signal: NodeJS.Signals = "SIGTERM",
  killAfterMs = 5000,
): Promise<Exit> {
  const exited = exitOf(child);
  if (child.exitCode === null && child.signalCode === null) child.kill(signal);
  const t = setTimeout(() => child.kill("SIGKILL"), killAfterMs);
  try {
    return await exited;
  } finally {
    clearTimeout(t);
  }
}

/** Splits a stream into lines and hands each to `sink`. */
export function lines(stream: NodeJS.ReadableStream | null | undefined, sink: (line: string) => void): void {
  if (!stream) return;
  let buf = "";
  stream.setEncoding?.("utf8");
  stream.on("data", (d: string) => {
    buf += d;
    for (let i = buf.indexOf("\n"); i >= 0; i = buf.indexOf("\n")) {
      sink(buf.slice(0, i));
      buf = buf.slice(i + 1);
    }
  });
  stream.on("end", () => {
    if (buf) sink(buf);
    buf = "";
  });
}
