// `npm run bench`: the benchmark of issue 8, end to end.
//   1. a fresh database on the local PostgreSQL (migrated by the project's migrator) with the dataset
//   2. the service (`node --import tsx server/main.ts`, i.e. tsx, production settings) and the raw
//      baseline (bench/baseline/server.ts) as child processes
//   3. per scenario: database round trips per request (sequential requests, statement counter),
//      a warm-up, then autocannon over loopback at each connection count (service, then baseline
//      where there is one, back to back so that both see the same machine load)
//   4. bench/results/<date>.md (+ .json with the raw numbers)
// Settings: see bench/config.ts and bench/README.md.
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import autocannon from "autocannon";
import { Redis } from "ioredis";
import pg from "pg";
import { benchConfig as cfg } from "./config.js";
import { createDataset, dropDataset, reuseDataset, type Dataset } from "./dataset.js";
import { cpuSeconds, memory, rssSampler, startProcess, waitReady, type Proc } from "./proc.js";
import { profileMarkdown } from "./profile.js";
import { buildScenarios, type Prepared, type Req, type Scenario } from "./scenarios.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const started = Date.now();
const log = (s: string) => process.stdout.write(`[bench ${((Date.now() - started) / 1000).toFixed(0).padStart(4)}s] ${s}\n`);
const runId = new Date().toISOString().replace(/[-:.TZ]/g, "").slice(0, 14);

export interface Run {
  target: "service" | "baseline" | "baseline-no-count";
  connections: number;
  requests: number;
  rps: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  statuses: Record<string, number>;
  rssMaxMiB: number;
  cpuMsPerReq: number;
  dbCpuMsPerReq: number;
  roundTripsPerReq: number;
}

export interface ScenarioResult {
  name: string;
  title: string;
  roundTrips: { service: number; baseline?: number };
  countStatuses: Record<string, number>;
  runs: Run[];
}

// ---- environment -------------------------------------------------------------------------------

async function versions() {
  const c = new pg.Client({ connectionString: cfg.pgBase });
  await c.connect();
  const pgv = (await c.query<{ v: string }>("SELECT current_setting('server_version') AS v")).rows[0]!.v;
  const settings = (await c.query<{ name: string; setting: string }>(
    `SELECT name, setting FROM pg_settings WHERE name IN ('shared_buffers','max_connections','jit','max_parallel_workers_per_gather','work_mem')`,
  )).rows;
  await c.end();
  const r = new Redis(cfg.redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 });
  await r.connect();
  const info = await r.info("server");
  r.disconnect();
  const cpuModel = /model name\s*:\s*(.+)/.exec(readFileSync("/proc/cpuinfo", "utf8"))?.[1] ?? "unknown";
  const pkg = (name: string) => {
    try {
      return JSON.parse(readFileSync(path.join(ROOT, "node_modules", name, "package.json"), "utf8")).version as string;
    } catch {
      return "?";
    }
  };
  return {
    node: process.version,
    postgres: pgv,
    pgSettings: Object.fromEntries(settings.map((s) => [s.name, s.setting])),
    redis: /redis_version:(\S+)/.exec(info)?.[1] ?? "?",
    cores: os.cpus().length,
    cpuModel,
    memGiB: Math.round(os.totalmem() / 2 ** 30),
    prisma: pkg("@prisma/client"),
    express: pkg("express"),
    autocannon: pkg("autocannon"),
    kernel: os.release(),
  };
}

// ---- database CPU (all backends of the benchmark database) --------------------------------------

async function dbCpuProbe(url: string) {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  const snapshot = async () => {
    const rows = (await c.query<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`)).rows;
    return new Map(rows.map((r) => [r.pid, cpuSeconds(r.pid)]));
  };
  return {
    snapshot,
    /** CPU seconds spent by backends between two snapshots (new backends count from zero). */
    delta(a: Map<number, number>, b: Map<number, number>) {
      let s = 0;
      for (const [pid, v] of b) s += v - (a.get(pid) ?? 0);
      return s;
    },
    close: () => c.end(),
  };
}

// ---- requests --------------------------------------------------------------------------------------

function headersFor(key: string, r: Req, extra: Record<string, string> = {}): Record<string, string> {
  return {
    "x-api-key": key,
    ...(r.body !== undefined ? { "content-type": "application/json" } : {}),
    ...(r.idempotencyKey ? { "idempotency-key": r.idempotencyKey } : {}),
    ...extra,
  };
}

async function send(target: Proc, key: string, r: Req, extra?: Record<string, string>) {
  const res = await fetch(target.url + r.path, { method: r.method, headers: headersFor(key, r, extra), body: r.body });
  const text = await res.text();
  return { status: res.status, text };
}

/** Waits until the server has finished the requests a previous run left in flight (its statement count stands still). */
async function settle(target: Proc): Promise<number> {
  let last = await target.queries();
  for (let i = 0; i < 100; i++) {
    await new Promise((r) => setTimeout(r, 300));
    const now = await target.queries();
    if (now === last) return now;
    last = now;
  }
  return last;
}

async function countRoundTrips(target: Proc, key: string, sc: Scenario, n: number) {
  const statuses: Record<string, number> = {};
  let sample = "";
  const q0 = await settle(target);
  for (let i = 0; i < n; i++) {
    const r = await send(target, key, sc.next());
    statuses[r.status] = (statuses[r.status] ?? 0) + 1;
    if (r.status >= 300 && !sample) sample = r.text.slice(0, 300);
  }
  const q1 = await target.queries();
  if (sample) log(`  ${target.name} ${sc.name}: non-2xx during the count: ${sample}`);
  return { perRequest: (q1 - q0) / n, statuses };
}

async function load(
  target: Proc,
  key: string,
  sc: Scenario,
  connections: number,
  duration: number,
  db: Awaited<ReturnType<typeof dbCpuProbe>> | undefined,
  extra?: Record<string, string>,
): Promise<Omit<Run, "target">> {
  const q0 = await settle(target);
  const rss = rssSampler(target.pid);
  const cpu0 = cpuSeconds(target.pid);
  const db0 = await db?.snapshot();
  const result = await autocannon({
    url: target.url,
    connections,
    duration,
    pipelining: 1,
    timeout: 30,
    requests: [
      {
        setupRequest: (req: any) => {
          const r = sc.next();
          return { ...req, method: r.method, path: r.path, body: r.body, headers: headersFor(key, r, extra) };
        },
      },
    ],
  } as autocannon.Options);
  // Requests still in flight when autocannon stops are finished (and charged to this run).
  const q1 = await settle(target);
  const cpu1 = cpuSeconds(target.pid);
  const db1 = await db?.snapshot();
  const requests = result.requests.total;
  // Per-request costs are divided by what was sent: requests still in flight at the end were finished too.
  const sent = Math.max(requests, (result.requests as { sent?: number }).sent ?? 0);
  const statuses: Record<string, number> = {};
  for (const [code, v] of Object.entries(result.statusCodeStats ?? {})) statuses[code] = (v as { count?: number }).count ?? 0;
  return {
    connections,
    requests,
    rps: requests / result.duration,
    p50: result.latency.p50,
    p90: result.latency.p90,
    p99: result.latency.p99,
    max: result.latency.max,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    statuses,
    rssMaxMiB: rss.stop(),
    cpuMsPerReq: sent ? ((cpu1 - cpu0) * 1000) / sent : 0,
    dbCpuMsPerReq: sent && db0 && db1 && db ? (db.delta(db0, db1) * 1000) / sent : 0,
    roundTripsPerReq: sent ? (q1 - q0) / sent : 0,
  };
}

// ---- preparation and sanity -----------------------------------------------------------------------

async function prepare(service: Proc, ds: Dataset): Promise<Prepared> {
  const messageCursors = new Map<string, string>();
  // Every conversation has 50 messages, so a limit=50 first page has no second page: the cursors are
  // taken after the 25 newest messages (the second page then holds the 25 older ones).
  for (const c of ds.big.conversationIds.slice(0, 100)) {
    const r = await send(service, ds.big.key, { method: "GET", path: `/public/v1/conversations/${c}/messages?limit=25` });
    if (r.status !== 200) throw new Error(`messages of ${c}: ${r.status} ${r.text.slice(0, 300)}`);
    const cursor = JSON.parse(r.text).pagination?.nextCursor;
    if (cursor) messageCursors.set(c, cursor);
  }
  return { messageCursors };
}

/** The baseline must answer exactly what the service answers (else the ratio compares different work). */
async function sameAnswers(service: Proc, baseline: Proc, key: string): Promise<string[]> {
  const problems: string[] = [];
  for (const p of ["/public/v1/me", "/public/v1/leads?limit=50", "/public/v1/leads?offset=50000&limit=50"]) {
    const [a, b] = await Promise.all([send(service, key, { method: "GET", path: p }), send(baseline, key, { method: "GET", path: p })]);
    if (a.status !== 200 || b.status !== 200) problems.push(`${p}: service ${a.status}, baseline ${b.status}`);
    else if (JSON.stringify(JSON.parse(a.text)) !== JSON.stringify(JSON.parse(b.text))) problems.push(`${p}: bodies differ`);
  }
  return problems;
}

// ---- report ---------------------------------------------------------------------------------------

const f0 = (n: number) => (Number.isFinite(n) ? n.toFixed(0) : "–");
const f1 = (n: number) => (Number.isFinite(n) ? n.toFixed(1) : "–");
const f2 = (n: number) => (Number.isFinite(n) ? n.toFixed(2) : "–");

function report(meta: Record<string, any>, results: ScenarioResult[], profile?: string): string {
  const v = meta.versions;
  const L: string[] = [];
  L.push(`# Benchmark results — ${meta.date}`, "");
  L.push(`Generated by \`npm run bench\` (bench/run.ts) in ${f0(meta.elapsedSeconds)} s. Raw numbers: \`${meta.jsonFile}\`.`, "");
  L.push("## Machine and versions", "");
  L.push(`- ${v.cores} cores (${v.cpuModel}), ${v.memGiB} GiB, Linux ${v.kernel}`);
  L.push(`- Node ${v.node}; PostgreSQL ${v.postgres} (${Object.entries(v.pgSettings).map(([k, x]) => `${k}=${x}`).join(", ")}); Redis ${v.redis}`);
  L.push(`- Prisma ${v.prisma} (@prisma/adapter-pg), Express ${v.express}, autocannon ${v.autocannon}`);
  L.push(`- load average (1 min) at start ${f2(meta.loadStart)}, at end ${f2(meta.loadEnd)}`);
  L.push("");
  L.push(
    "> **Noise.** The service, PostgreSQL, Redis and autocannon share these cores, and other developers were running test " +
      "suites on the same machine during this run: absolute numbers are noisy. The service/baseline ratios (measured back " +
      "to back), CPU milliseconds per request and round trips per request are the comparable figures.",
    "",
  );
  L.push("## Setup", "");
  L.push(`- Dataset (${f1(meta.loadSeconds)} s to create, migrate, load and VACUUM ANALYZE): ${Object.entries(meta.rows).map(([k, n]) => `${k} ${n}`).join(", ")}.`);
  L.push(`  The large tenant: ${meta.bigSize.leads} leads, ${meta.bigSize.contacts} contacts, ${meta.bigSize.conversations} conversations × ${meta.bigSize.messagesPer} messages, ${meta.bigSize.appointments} appointments, ${meta.bigSize.tickets} tickets (0–3 comments each); plus 50 small tenants.`);
  L.push(`- Each (scenario, connections) run: ${meta.duration} s measured after a ${meta.warmup} s warm-up per scenario; autocannon over loopback, pipelining 1.`);
  L.push(`- Service: \`node ${meta.nodeFlags.length ? meta.nodeFlags.join(" ") + " " : ""}--import tsx server/main.ts\`, NODE_ENV=production, LOG_LEVEL=warn, pool of 10 connections, BENCH_COUNT_QUERIES=1.`);
  L.push(`- Baseline: bench/baseline/server.ts (node:http + pg + ioredis, same SQL, pool of 10).`);
  L.push(`- Round trips: statements sent to PostgreSQL per request (pg client query calls, BEGIN/COMMIT included), from ${meta.countRequests} sequential requests; Redis calls are not counted (one per request for quotas in both).`);
  L.push(`- CPU ms/req: user+system CPU of the server process per request; DB ms/req: CPU of the benchmark database's backends per request.`);
  L.push("");
  if (meta.sanity.length) L.push(`**Baseline answers differ from the service's:** ${meta.sanity.join("; ")}`, "");
  else L.push("Sanity: the baseline's GET /me and GET /leads (first and deep page) bodies are identical to the service's.", "");

  L.push("## Service: all scenarios", "");
  L.push("| scenario | conns | req/s | p50 ms | p90 ms | p99 ms | non-2xx | errors | CPU ms/req | DB ms/req | round trips/req | peak RSS MiB |");
  L.push("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
  for (const s of results)
    for (const r of s.runs.filter((x) => x.target === "service"))
      L.push(`| ${s.title} | ${r.connections} | ${f0(r.rps)} | ${f1(r.p50)} | ${f1(r.p90)} | ${f1(r.p99)} | ${r.non2xx} | ${r.errors} | ${f2(r.cpuMsPerReq)} | ${f2(r.dbCpuMsPerReq)} | ${f1(s.roundTrips.service)} | ${f0(r.rssMaxMiB)} |`);
  L.push("");
  L.push("## Service / baseline", "");
  L.push("| scenario | conns | service req/s | baseline req/s | **ratio** | service p99 | baseline p99 | service CPU ms/req | baseline CPU ms/req | round trips service / baseline |");
  L.push("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
  for (const s of results) {
    for (const r of s.runs.filter((x) => x.target === "service")) {
      const b = s.runs.find((x) => x.target === "baseline" && x.connections === r.connections);
      if (!b) continue;
      L.push(`| ${s.title} | ${r.connections} | ${f0(r.rps)} | ${f0(b.rps)} | **${f2(r.rps / b.rps)}** | ${f1(r.p99)} | ${f1(b.p99)} | ${f2(r.cpuMsPerReq)} | ${f2(b.cpuMsPerReq)} | ${f1(s.roundTrips.service)} / ${f1(s.roundTrips.baseline ?? NaN)} |`);
    }
  }
  const nc = results.flatMap((s) => s.runs.filter((x) => x.target === "baseline-no-count").map((r) => ({ s, r })));
  for (const { s, r } of nc) {
    const b = s.runs.find((x) => x.target === "baseline" && x.connections === r.connections);
    L.push("");
    L.push(
      `What an exact \`count(*)\` costs: the baseline without the count (\`total\` not computed) serves ${s.title} at ${f0(r.rps)} req/s, ` +
        `p99 ${f1(r.p99)} ms, DB ${f2(r.dbCpuMsPerReq)} ms/req at ${r.connections} connections, against ${f0(b?.rps ?? NaN)} req/s, p99 ${f1(b?.p99 ?? NaN)} ms, DB ${f2(b?.dbCpuMsPerReq ?? NaN)} ms/req with it.`,
    );
  }
  L.push("");
  L.push("## Memory", "");
  L.push(`- Service peak RSS (VmHWM over the whole run): **${f0(meta.serviceHwm)} MiB**; baseline: ${f0(meta.baselineHwm)} MiB.`);
  L.push(`- RSS once ready, before any load: service ${f0(meta.startupRss.service)} MiB, baseline ${f0(meta.startupRss.baseline)} MiB (both under tsx).`);
  L.push(`- Highest RSS sampled during each run: the \`peak RSS MiB\` column above.${meta.nodeFlags.length ? ` Service node flags: \`${meta.nodeFlags.join(" ")}\`.` : ""}`, "");

  L.push("## Goals of issue 8 at 32 connections", "");
  const at = (name: string, target: Run["target"] = "service") =>
    results.find((s) => s.name === name)?.runs.find((r) => r.target === target && r.connections === 32);
  const ratio = (name: string) => {
    const a = at(name);
    const b = at(name, "baseline");
    return a && b ? a.rps / b.rps : NaN;
  };
  const lists = results.filter((s) => s.title.startsWith("GET") && s.name !== "me");
  const worstList = lists.map((s) => ({ s, r: at(s.name) })).filter((x) => x.r).sort((a, b) => b.r!.p99 - a.r!.p99)[0];
  const first = at("leads");
  const deep = at("leads-deep");
  const authTrips = results.find((s) => s.name === "me")?.roundTrips.service ?? NaN;
  L.push("| goal | measured | met |", "|---|---|---|");
  L.push(`| GET /leads?limit=50 ≥ 0.70 of baseline | ${f2(ratio("leads"))} | ${ratio("leads") >= 0.7 ? "yes" : "no"} |`);
  L.push(`| POST /leads ≥ 0.70 of baseline | ${f2(ratio("post-leads"))} | ${ratio("post-leads") >= 0.7 ? "yes" : "no"} |`);
  L.push(`| p99 ≤ 20 ms on every list scenario | worst: ${worstList ? `${worstList.s.title} ${f1(worstList.r!.p99)} ms` : "–"} | ${worstList && worstList.r!.p99 <= 20 ? "yes" : "no"} |`);
  for (const s of lists) {
    const r = at(s.name);
    if (r) L.push(`| &nbsp;&nbsp;${s.title} p99 | ${f1(r.p99)} ms | ${r.p99 <= 20 ? "yes" : "no"} |`);
  }
  if (first && deep)
    L.push(`| deep page ≤ 2× first page | p50 ${f1(deep.p50)} vs ${f1(first.p50)} ms (${f2(deep.p50 / first.p50)}×), req/s ${f0(deep.rps)} vs ${f0(first.rps)} | ${deep.p50 <= 2 * first.p50 ? "yes" : "no"} |`);
  L.push(`| peak RSS < 250 MB | ${f0(meta.serviceHwm * 1.048576)} MB | ${meta.serviceHwm * 1.048576 < 250 ? "yes" : "no"} |`);
  L.push(`| auth + plan + rate limit ≤ 1 DB round trip | GET /me: ${f1(authTrips)} | ${authTrips <= 1 ? "yes" : "no"} |`);
  L.push("");
  if (profile) L.push("## CPU profile of the service (node --cpu-prof, whole run)", "", profile, "");
  return L.join("\n");
}

// ---- main -----------------------------------------------------------------------------------------

async function main() {
  const v = await versions();
  const loadStart = os.loadavg()[0]!;
  log(`${v.cores} cores, Node ${v.node}, PostgreSQL ${v.postgres}, Redis ${v.redis}; load ${loadStart.toFixed(2)}`);
  const ds = cfg.reuseDb
    ? await reuseDataset({ pgBase: cfg.pgBase, dbName: cfg.dbName, scale: cfg.scale })
    : await createDataset({ pgBase: cfg.pgBase, dbName: cfg.dbName, scale: cfg.scale, log });
  log(`dataset ready in ${ds.loadSeconds.toFixed(1)} s: ${JSON.stringify(ds.rows)}`);

  const profDir = path.join(ROOT, "bench/results/profiles", runId);
  const service = startProcess({
    name: "service",
    cwd: ROOT,
    port: cfg.servicePort,
    args: [...cfg.nodeFlags, ...(cfg.profile ? ["--cpu-prof", `--cpu-prof-dir=${profDir}`] : []), "--import", "tsx", "server/main.ts"],
    env: {
      ...process.env,
      DATABASE_URL: ds.url,
      REDIS_URL: cfg.redisUrl,
      PORT: String(cfg.servicePort),
      HOST: "127.0.0.1",
      LOG_LEVEL: process.env.BENCH_LOG_LEVEL || "warn",
      NODE_ENV: "production",
      NO_DEMO: "1",
      BENCH_COUNT_QUERIES: "1",
    },
  });
  const baseline = startProcess({
    name: "baseline",
    cwd: ROOT,
    port: cfg.baselinePort,
    args: ["--import", "tsx", "bench/baseline/server.ts"],
    env: { ...process.env, DATABASE_URL: ds.url, REDIS_URL: cfg.redisUrl, PORT: String(cfg.baselinePort), NODE_ENV: "production", BENCH_COUNT_QUERIES: "1" },
  });
  const results: ScenarioResult[] = [];
  let sanity: string[] = [];
  let profile: string | undefined;
  let startupRss = { service: NaN, baseline: NaN };
  const db = await dbCpuProbe(ds.url);
  try {
    await Promise.all([waitReady(service, "/readyz"), waitReady(baseline, "/healthz")]);
    await new Promise((r) => setTimeout(r, 1000));
    startupRss = { service: memory(service.pid).rss, baseline: memory(baseline.pid).rss };
    log(`service pid ${service.pid} and baseline pid ${baseline.pid} ready (RSS ${startupRss.service.toFixed(0)} / ${startupRss.baseline.toFixed(0)} MiB)`);
    const prep = await prepare(service, ds);
    sanity = await sameAnswers(service, baseline, ds.big.key);
    if (sanity.length) log(`WARNING: ${sanity.join("; ")}`);

    const all = buildScenarios(ds, prep, runId);
    const chosen = all.filter((s) => !cfg.only || cfg.only.has(s.name));
    const ordered = [...chosen.filter((s) => !s.write), ...chosen.filter((s) => s.write)];
    for (const sc of ordered) {
      const key = ds.big.key;
      const rt = await countRoundTrips(service, key, sc, cfg.countRequests);
      const rtb = sc.baseline ? await countRoundTrips(baseline, key, sc, cfg.countRequests) : undefined;
      const res: ScenarioResult = { name: sc.name, title: sc.title, roundTrips: { service: rt.perRequest, baseline: rtb?.perRequest }, countStatuses: rt.statuses, runs: [] };
      log(`${sc.title}: ${rt.perRequest.toFixed(1)} round trips/request${rtb ? ` (baseline ${rtb.perRequest.toFixed(1)})` : ""}`);
      if (cfg.warmup > 0) {
        await load(service, key, sc, 8, cfg.warmup, undefined);
        if (sc.baseline) await load(baseline, key, sc, 8, cfg.warmup, undefined);
      }
      for (const c of cfg.connections) {
        const s = await load(service, key, sc, c, cfg.duration, db);
        res.runs.push({ target: "service", ...s });
        let line = `  ${String(c).padStart(2)} conns: service ${s.rps.toFixed(0)} req/s p50 ${s.p50} p99 ${s.p99} ms non-2xx ${s.non2xx} cpu ${s.cpuMsPerReq.toFixed(2)} db ${s.dbCpuMsPerReq.toFixed(2)} ms/req`;
        if (sc.baseline) {
          const b = await load(baseline, key, sc, c, cfg.duration, db);
          res.runs.push({ target: "baseline", ...b });
          line += ` | baseline ${b.rps.toFixed(0)} req/s p99 ${b.p99} ms → ratio ${(s.rps / b.rps).toFixed(2)}`;
        }
        log(line);
        if (s.non2xx > 0) log(`  non-2xx statuses: ${JSON.stringify(s.statuses)}`);
      }
      if (sc.name === "leads" && cfg.connections.includes(32)) {
        const b = await load(baseline, key, sc, 32, cfg.duration, db, { "x-bench-no-count": "1" });
        res.runs.push({ target: "baseline-no-count", ...b });
        log(`  32 conns: baseline without count(*) ${b.rps.toFixed(0)} req/s p99 ${b.p99} ms`);
      }
      results.push(res);
    }
  } finally {
    const serviceHwm = memory(service.pid).hwm;
    const baselineHwm = memory(baseline.pid).hwm;
    await db.close().catch(() => {});
    await Promise.all([service.stop(), baseline.stop()]);
    if (cfg.profile && existsSync(profDir)) {
      const file = readdirSync(profDir).filter((f) => f.endsWith(".cpuprofile")).map((f) => path.join(profDir, f))[0];
      if (file) {
        profile = profileMarkdown(file);
        log(`CPU profile: ${path.relative(ROOT, file)}`);
      }
    }
    if (!cfg.keepDb && !cfg.reuseDb) await dropDataset(cfg.pgBase, cfg.dbName).catch((e) => log(`drop failed: ${e.message}`));
    if (results.length) {
      const date = new Date().toISOString().slice(0, 10);
      const out = cfg.out ?? path.join(ROOT, "bench/results", `${date}.md`);
      const jsonFile = out.replace(/\.md$/, ".json");
      mkdirSync(path.dirname(out), { recursive: true });
      const meta = {
        date,
        runId,
        elapsedSeconds: (Date.now() - started) / 1000,
        versions: v,
        loadStart,
        loadEnd: os.loadavg()[0]!,
        loadSeconds: ds.loadSeconds,
        rows: ds.rows,
        bigSize: ds.big.size,
        duration: cfg.duration,
        warmup: cfg.warmup,
        countRequests: cfg.countRequests,
        connections: cfg.connections,
        serviceHwm,
        baselineHwm,
        startupRss,
        nodeFlags: cfg.nodeFlags,
        sanity,
        jsonFile: path.relative(ROOT, jsonFile),
      };
      writeFileSync(jsonFile, JSON.stringify({ meta, results }, null, 2) + "\n");
      // Hand-written notes below the marker survive a re-run on the same day.
      const MARK = "<!-- notes: hand-written below this line, kept by re-runs -->";
      const previous = existsSync(out) ? readFileSync(out, "utf8") : "";
      const notes = previous.includes(MARK) ? previous.slice(previous.indexOf(MARK)) : `${MARK}\n`;
      writeFileSync(out, `${report(meta, results, profile)}\n${notes}`);
      log(`results: ${path.relative(ROOT, out)} (${((Date.now() - started) / 1000).toFixed(0)} s in all)`);
    }
  }
}

main().then(
  () => process.exit(0),
  (e) => {
    process.stderr.write(`bench failed: ${(e as Error).stack}\n`);
    process.exit(1);
  },
);
