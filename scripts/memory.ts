// Resident memory of the service as a process (≤ 120 MiB idle after start, ≤ 200 MiB
// peak under 32 connections), read from /proc/<pid>/status:
//
//   npx tsx scripts/memory.ts [--runtime dist|tsx|both|all] [--backend pglite|postgres|both]
//                             [--seconds 20] [--connections 32] [-- NODE_FLAGS...]
//
// For each runtime × backend: a database with the demo tenant (its rate limits lifted) is prepared
// first — PGlite: a fresh data folder, migrated and loaded by this script, then closed (PGlite allows
// one process); PostgreSQL: a new database on DATABASE_BASE (postgresql://postgres@127.0.0.1:5432),
// with REDIS_URL (redis://127.0.0.1:6379), dropped afterwards — then the service is started on it
// (`dist`: what `npm start` runs, built first when stale; `dist-plain`: the same bundle with
// --enable-source-maps only, without the memory flags; `tsx`: `node --import tsx server/main.ts`;
// `all`: the three), and measured:
//   idle  RSS 3 s after /readyz answers, before any request
//   peak  the largest RSS sampled every 50 ms during `--seconds` of autocannon at `--connections`,
//         each connection cycling GET /public/v1/me, GET /public/v1/leads?limit=50, POST
//         /public/v1/leads (a new lead each time)
//   hwm   VmHWM: the process's lifetime high-water mark (start included)
//   CPU   the service's CPU time (user + system) during the load, per request
// plus the V8 heap and "external" (ArrayBuffers, WebAssembly memories) seen by the process itself
// at the end (MEMORY_PROBE: scripts/memory-probe.mjs, loaded with --import). Prints a Markdown table.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, existsSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import autocannon from "autocannon";
import { ensureBuild, serviceCommand, ROOT, SERVICE_ENTRY } from "./ensure-build.js";
import { freePort, sleep, startService, stopService } from "./service-process.js";
import { openPglite, openPostgres, type Database } from "../server/db/client.js";
import { migrate } from "../server/db/migrate.js";
import { loadFixture } from "../server/admin/fixture.js";
import { demoFixture } from "../server/admin/demo.js";
import { setTenantLimits } from "../server/admin/operations.js";

type Runtime = "dist" | "dist-plain" | "tsx";
type Backend = "pglite" | "postgres";

const argv = process.argv.slice(2);
const dash = argv.indexOf("--");
const nodeFlags = dash >= 0 ? argv.slice(dash + 1) : [];
const opts = dash >= 0 ? argv.slice(0, dash) : argv;
const opt = (name: string, def: string) => {
  const i = opts.indexOf(`--${name}`);
  return i >= 0 && opts[i + 1] ? opts[i + 1]! : def;
};
const both = <T extends string>(v: string, all: T[]): T[] => (v === "both" ? all : [v as T]);
const runtimes =
  opt("runtime", "dist") === "all"
    ? (["tsx", "dist-plain", "dist"] as Runtime[])
    : both<Runtime>(opt("runtime", "dist"), ["tsx", "dist"]);
const backends = both<Backend>(opt("backend", "both"), ["pglite", "postgres"]);
const seconds = Number(opt("seconds", "20"));
const connections = Number(opt("connections", "32"));
const PG_BASE = process.env.DATABASE_BASE || "postgresql://postgres@127.0.0.1:5432";
const REDIS_URL = process.env.REDIS_URL || "redis://127.0.0.1:6379";
const PROBE = path.join(ROOT, "scripts/memory-probe.mjs");

const mib = (kb: number) => kb / 1024;

function status(pid: number): { rss: number; hwm: number } {
  const s = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+)`, "m").exec(s)?.[1] ?? NaN);
  return { rss: mib(kb("VmRSS")), hwm: mib(kb("VmHWM")) };
}

/** CPU time (user + system) of a process so far, in ms (/proc/<pid>/stat, USER_HZ = 100). */
function cpuMs(pid: number): number {
  const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return (Number(f[11]) + Number(f[12])) * 10;
}

/** Demo tenant, migrated, rate limits lifted: returns its API key. */
async function seed(db: Database): Promise<string> {
  await migrate(db.sql);
  const ids = await loadFixture(db, demoFixture());
  const demo = ids.tenants.demo!;
  await setTenantLimits(db, demo.id, "100000000", "1000000000");
  return demo.apiKeys.demo!.key;
}

interface Prepared {
  env: Record<string, string>;
  key: string;
  cleanup(): void;
}

async function prepare(backend: Backend): Promise<Prepared> {
  if (backend === "pglite") {
    const dir = mkdtempSync(path.join(os.tmpdir(), "memory-pglite-"));
    const db = await openPglite(dir);
    const key = await seed(db);
    await db.close();
    return { env: { PGLITE_DATA_DIR: dir }, key, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
  }
  const name = `memory_${process.pid}_${Date.now()}`;
  execFileSync("psql", [`${PG_BASE}/postgres`, "-qc", `CREATE DATABASE ${name}`]);
  const url = `${PG_BASE}/${name}`;
  const db = await openPostgres(url);
  const key = await seed(db);
  await db.close();
  return {
    env: { DATABASE_URL: url, REDIS_URL },
    key,
    cleanup: () => execFileSync("psql", [`${PG_BASE}/postgres`, "-qc", `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`]),
  };
}

async function start(runtime: Runtime, env: Record<string, string>, port: number, probeFile: string) {
  const flags = [...nodeFlags, "--import", PROBE];
  const command =
    runtime === "dist"
      ? serviceCommand(flags)
      : runtime === "dist-plain"
        ? { command: process.execPath, args: [...flags, "--enable-source-maps", SERVICE_ENTRY] }
        : { command: process.execPath, args: [...flags, "--import", "tsx", "server/main.ts"] };
  return startService(command, { ...env, MEMORY_PROBE: probeFile }, port);
}

function load(port: number, key: string) {
  let n = 0;
  const headers = { "x-api-key": key, "content-type": "application/json" };
  return autocannon({
    url: `http://127.0.0.1:${port}`,
    connections,
    duration: seconds,
    requests: [
      { method: "GET", path: "/public/v1/me", headers },
      { method: "GET", path: "/public/v1/leads?limit=50", headers },
      {
        method: "POST",
        path: "/public/v1/leads",
        headers,
        setupRequest: (req) => {
          n++;
          return {
            ...req,
            body: JSON.stringify({
              customerName: `Memory Lead ${n}`,
              customerPhone: `+3461${String(n % 1e7).padStart(7, "0")}`,
              customerEmail: `m${n}@nobody.example`,
              intent: "buy",
            }),
          };
        },
      },
    ],
  });
}

interface Row {
  runtime: Runtime;
  backend: Backend;
  idle: number;
  peak: number;
  hwm: number;
  requests: number;
  non2xx: number;
  cpu: number;
  heapUsed?: number;
  external?: number;
}

async function measure(runtime: Runtime, backend: Backend): Promise<Row> {
  const db = await prepare(backend);
  const probeFile = path.join(os.tmpdir(), `memory-probe-${process.pid}-${runtime}-${backend}.json`);
  const port = await freePort();
  const child = await start(runtime, db.env, port, probeFile);
  try {
    await sleep(3000);
    const idle = status(child.pid!).rss;
    let peak = idle;
    const sampler = setInterval(() => (peak = Math.max(peak, status(child.pid!).rss)), 50);
    const cpu0 = cpuMs(child.pid!);
    const result = await load(port, db.key);
    const cpu = (cpuMs(child.pid!) - cpu0) / Math.max(1, result.requests.total);
    clearInterval(sampler);
    peak = Math.max(peak, status(child.pid!).rss);
    const hwm = status(child.pid!).hwm;
    await sleep(1200);
    const probe = existsSync(probeFile) ? JSON.parse(readFileSync(probeFile, "utf8")) : {};
    return {
      runtime,
      backend,
      idle,
      peak,
      hwm,
      requests: result.requests.total,
      non2xx: result.non2xx,
      cpu,
      heapUsed: probe.heapUsed,
      external: probe.external,
    };
  } finally {
    await stopService(child);
    rmSync(probeFile, { force: true });
    db.cleanup();
  }
}

const f0 = (n: number | undefined) => (n === undefined || Number.isNaN(n) ? "–" : n.toFixed(0));
const rows: Row[] = [];
if (runtimes.some((r) => r.startsWith("dist"))) await ensureBuild();
for (const runtime of runtimes)
  for (const backend of backends) {
    process.stderr.write(`memory: ${runtime} on ${backend}…\n`);
    rows.push(await measure(runtime, backend));
  }
const lines = [
  `Node ${process.version}, ${os.cpus().length} cores, ${connections} connections × ${seconds} s (GET /me, GET ` +
    `/leads?limit=50, POST /leads)${nodeFlags.length ? `, node flags ${nodeFlags.join(" ")}` : ""}`,
  "",
  "| runtime | backend | idle RSS MiB | peak RSS under load MiB | lifetime VmHWM MiB | V8 heap used / external " +
    "MiB (end) | requests (non-2xx) | CPU ms/request |",
  "|---|---|---:|---:|---:|---:|---:|---:|",
  ...rows.map(
    (r) =>
      `| ${r.runtime} | ${r.backend} | ${f0(r.idle)} | ${f0(r.peak)} | ${f0(r.hwm)} | ${f0(r.heapUsed)} / ` +
      `${f0(r.external)} | ${r.requests} (${r.non2xx}) | ${r.cpu.toFixed(2)} |`,
  ),
];
process.stdout.write(`${lines.join("\n")}\n`);
