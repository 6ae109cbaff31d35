// Service instances as child processes: the compiled service (`node --enable-source-maps
// dist/server/main.js`, built first when missing or stale: scripts/ensure-build.ts) with their own PORT, the
// drill's DATABASE_URL/REDIS_URL, NO_DEMO=1 and LOG_LEVEL (debug by default, so that drill 8 can
// check the most verbose logs for secrets). Every output line is kept (observe.ts).
import { spawn, type ChildProcess } from "node:child_process";
import { ensureBuild, serviceCommand } from "../../scripts/ensure-build.js";
import { addLogLine } from "./observe.js";
import { exitOf, lines, onFreePort, ROOT, terminate, type Exit } from "./proc.js";
import { sleep, type Scope } from "./scope.js";

export interface Service {
  name: string;
  port: number;
  url: string;
  child: ChildProcess;
  logs: string[];
  exited: Promise<Exit>;
  /** Sends a signal; resolves at exit (or after killAfterMs with SIGKILL). */
  stop(signal?: NodeJS.Signals, killAfterMs?: number): Promise<Exit>;
}

const INHERITED_OUT = [
  "DATABASE_URL",
  "DIRECT_DATABASE_URL",
  "REDIS_URL",
  "REDIS_CLUSTER_NODES",
  "METRICS_PORT",
  "METRICS_HOST",
  "PORT",
  "HOST",
  "LOG_LEVEL",
  "PROVIDER_TIMEOUT_MS",
  "NO_DEMO",
  "PGLITE_DATA_DIR",
  "BODY_LIMIT_BYTES",
];

export const DEFAULT_LOG_LEVEL = process.env.DRILL_LOG_LEVEL || "debug";

export async function startService(
  scope: Scope,
  name: string,
  env: Record<string, string | undefined>,
): Promise<Service> {
  await ensureBuild();
  // On another port when the one picked was taken before the service bound it.
  return onFreePort((port) => startOn(scope, name, env, port));
}

type Env = Record<string, string | undefined>;

async function startOn(scope: Scope, name: string, env: Env, port: number): Promise<Service> {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !INHERITED_OUT.includes(k)));
  const { command, args } = serviceCommand();
  const child = spawn(command, args, {
    cwd: ROOT,
    env: {
      ...base,
      PORT: String(port),
      HOST: "127.0.0.1",
      NO_DEMO: "1",
      LOG_LEVEL: DEFAULT_LOG_LEVEL,
      ...env,
    } as NodeJS.ProcessEnv,
    stdio: ["ignore", "pipe", "pipe"],
  });
  const logs: string[] = [];
  const sink = (line: string) => {
    logs.push(line);
    addLogLine(name, line);
  };
  lines(child.stdout, sink);
  lines(child.stderr, sink);
  const exited = exitOf(child);
  const svc: Service = {
    name,
    port,
    url: `http://127.0.0.1:${port}`,
    child,
    logs,
    exited,
    stop: (signal = "SIGTERM", killAfterMs = 15_000) => terminate(child, signal, killAfterMs),
  };
  scope.defer(`stop ${name}`, async () => {
    await svc.stop("SIGKILL", 5000);
  });
  const deadline = Date.now() + 60_000;
  let up = false;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) break;
    try {
      const r = await fetch(`${svc.url}/healthz`, { signal: AbortSignal.timeout(1000) });
      if (r.ok) {
        up = true;
        break;
      }
    } catch {
      /* not yet */
    }
    await sleep(100);
  }
  if (!up) throw new Error(`${name} did not come up on :${port}; last output:\n${logs.slice(-15).join("\n")}`);
  return svc;
}

/** Starts several instances at once (they migrate concurrently: the migrator takes an advisory lock). */
export function startServices(
  scope: Scope,
  names: string[],
  env: Record<string, string | undefined>,
): Promise<Service[]> {
  return Promise.all(names.map((n) => startService(scope, n, env)));
}

/** The services' error-level log lines (pino level >= 50), shortened: what a 5xx was about. */
export function errorLines(services: Service[]): string[] {
  const out: string[] = [];
  for (const s of services)
    for (const line of s.logs) {
      try {
        const j = JSON.parse(line);
        if (j.level >= 50) out.push(`${s.name}: ${j.msg} ${JSON.stringify(j.err ?? {}).slice(0, 400)}`);
      } catch {
        if (/error/i.test(line)) out.push(`${s.name}: ${line.slice(0, 300)}`);
      }
    }
  return out;
}

/** The services' log lines that mention a request id. */
export function logsOf(services: Service[], requestId: string | undefined): string[] {
  if (!requestId) return [];
  return services.flatMap((s) => s.logs.filter((l) => l.includes(requestId)).map((l) => `${s.name}: ${l}`));
}
