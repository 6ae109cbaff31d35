// The service as a child process for the hand-run measurements (scripts/memory.ts,
// scripts/page-memory.ts): a free port, a start that waits for /readyz, a stop.
import { type ChildProcess, spawn } from "node:child_process";
import { createServer } from "node:net";
import { ROOT } from "./ensure-build.js";

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
    s.on("error", reject);
  });
}

/**
 * Starts `command` as the service on `port` with `env` over this process's environment (its
 * database and Redis settings left out), in production mode without the demo; resolves once
 * /readyz answers (at most 2 minutes; a failure quotes the end of its stderr).
 */
export async function startService(
  { command, args }: { command: string; args: string[] },
  env: Record<string, string>,
  port: number,
): Promise<ChildProcess> {
  const clean = Object.fromEntries(
    Object.entries(process.env).filter(
      ([k]) => !["DATABASE_URL", "REDIS_URL", "PGLITE_DATA_DIR", "REDIS_CLUSTER_NODES"].includes(k),
    ),
  );
  const child = spawn(command, args, {
    cwd: ROOT,
    env: {
      ...clean,
      ...env,
      PORT: String(port),
      HOST: "127.0.0.1",
      LOG_LEVEL: "warn",
      NODE_ENV: "production",
      NO_DEMO: "1",
    },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr!.on("data", (d: Buffer) => {
    stderr = (stderr + d.toString()).slice(-4000);
  });
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`service exited: ${stderr}`);
    if (Date.now() > deadline) throw new Error(`service not ready: ${stderr}`);
    try {
      if ((await fetch(`http://127.0.0.1:${port}/readyz`)).ok) break;
    } catch {
      /* not yet */
    }
    await sleep(200);
  }
  return child;
}

/** SIGTERM, then SIGKILL if it has not exited within 12 s. */
export async function stopService(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((r) => child.once("exit", r));
  child.kill("SIGTERM");
  await Promise.race([exited, sleep(12_000)]);
  if (child.exitCode === null) child.kill("SIGKILL");
}
