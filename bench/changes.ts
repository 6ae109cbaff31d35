// BENCH_CHANGES=1 npm run bench: changes within a second (GET /public/v1/changes?wait and the tRPC
// subscription changes.subscribe), on the same machine, reported as percentiles and ratios of one run.
//   1. a fresh database (BENCH_DB_NAME + "_changes") migrated by the project's migrator, and one
//      fixture: a writer tenant with four keys, and BENCH_CHANGES_KEYS keys over 25 idle tenants
//   2. two service instances (what `npm start` runs) on that database and the local Redis
//   3. latency: a long-poll chain and a subscription on each instance follow the writer tenant while
//      BENCH_CHANGES_WRITES leads are created on instance A; commit-to-delivery is measured from the
//      moment each create was sent (an upper bound: the commit is later) to its delivery. On A:
//      one instance (in-process wake-ups); on B: two instances (Redis pub/sub)
//   4. idle waiters on instance A alone: GET /me under load without waiters, with
//      BENCH_CHANGES_WAITERS waiters held (half long-polls re-armed at their 25 s bound, half
//      subscriptions, two per key), and without again; the service's RSS, the database's
//      connections, the p99 of GET /me, the re-arm rate
// The waiters run in a child process of their own (so the GET /me load generator's event loop is not
// theirs); the results go to bench/results/<date>-changes.md and .json.
import { fork, type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { writeFileSync } from "node:fs";
import http from "node:http";
import path from "node:path";
import { fileURLToPath } from "node:url";
import autocannon from "autocannon";
import pg from "pg";
import { loadFixture } from "../server/admin/fixture.js";
import { openPostgres } from "../server/db/client.js";
import { migrate } from "../server/db/migrate.js";
import { benchConfig as cfg, dbUrl } from "./config.js";
import { percentiles } from "./latency.js";
import { cpuSeconds, memory, serviceCommand, startProcess, waitReady, type Proc } from "./proc.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const started = Date.now();
const log = (s: string) =>
  process.stdout.write(`[bench ${((Date.now() - started) / 1000).toFixed(0).padStart(4)}s] ${s}\n`);

const num = (name: string, fallback: number) => {
  const v = Number(process.env[name] ?? fallback);
  if (!Number.isFinite(v) || v <= 0) throw new Error(`${name} must be a positive number`);
  return v;
};
const settings = {
  writes: num("BENCH_CHANGES_WRITES", cfg.quick ? 60 : 200),
  waiters: num("BENCH_CHANGES_WAITERS", 5000),
  keys: num("BENCH_CHANGES_KEYS", 2500),
  /** Seconds over which the waiters open (they then re-arm spread over their 25 s bound). */
  rampS: num("BENCH_CHANGES_RAMP_S", 10),
  /** Of every two waiters of a key, how many are subscriptions: 1 (a long-poll and a subscription), 0 or 2. */
  subscriptionsPerKey: Number(process.env.BENCH_CHANGES_SUBSCRIPTIONS_PER_KEY ?? 1),
  /** GET /me's measured seconds per run, and its connections. */
  meDuration: num("BENCH_DURATION", cfg.quick ? 4 : 10),
  meConnections: 8,
  /** The service process's RSS bound with every waiter held (the issue's target). */
  rssTargetMiB: 400,
};
const IDLE_TENANTS = 25;
const WAIT_S = 25;
const ports = { a: 3911, b: 3912, metricsA: 3913 };

interface Delivery {
  watcher: string;
  leadId: string;
  at: number;
}

/** A long-poll chain on `base` with `key`: records each delivered lead's arrival; stops when `stop()`. */
function longPollChain(name: string, base: string, key: string, deliveries: Delivery[]) {
  let stopped = false;
  const ctl = new AbortController();
  const errors: string[] = [];
  const done = (async () => {
    let since = "now";
    while (!stopped) {
      const url = `${base}/public/v1/changes?types=lead&limit=100&wait=${WAIT_S}&since=${encodeURIComponent(since)}`;
      let r: Response;
      try {
        r = await fetch(url, { headers: { "X-API-Key": key }, signal: ctl.signal });
      } catch (e) {
        if (stopped) return;
        throw e;
      }
      const body = (await r.json()) as { items: { id: string }[]; nextSince: string; backoff?: number };
      const at = performance.now();
      if (r.status !== 200) throw new Error(`${name}: ${r.status} ${JSON.stringify(body)}`);
      for (const i of body.items) deliveries.push({ watcher: name, leadId: i.id, at });
      since = body.nextSince;
      if (body.backoff) await new Promise((res) => setTimeout(res, body.backoff! * 1000));
    }
  })().catch((e: Error) => void errors.push(e.message));
  return {
    errors,
    stop: async () => {
      stopped = true;
      ctl.abort();
      await done.catch(() => {});
    },
  };
}

/**
 * The subscription as server-sent events (the wire format tRPC's httpSubscriptionLink reads: `id:` and
 * `data:` lines per event), over one plain HTTP connection.
 */
function sseStream(
  base: string,
  key: string,
  input: Record<string, unknown>,
  onPage: (page: { items: { id: string }[]; nextSince: string }, at: number) => void,
  onEnd: (why: string) => void,
  agent?: http.Agent,
): { close: () => void; opened: Promise<number> } {
  const url = new URL(`${base}/trpc/changes.subscribe`);
  url.searchParams.set("input", JSON.stringify(input));
  let resolveOpened!: (status: number) => void;
  const opened = new Promise<number>((r) => (resolveOpened = r));
  const req = http.get(url, { headers: { "X-API-Key": key, Accept: "text/event-stream" }, agent }, (res) => {
    resolveOpened(res.statusCode ?? 0);
    res.setEncoding("utf8");
    let buf = "";
    res.on("data", (chunk: string) => {
      buf += chunk;
      for (let i = buf.indexOf("\n\n"); i >= 0; i = buf.indexOf("\n\n")) {
        const event = buf.slice(0, i);
        buf = buf.slice(i + 2);
        const kind = /^event: ?(.*)$/m.exec(event)?.[1];
        const data = /^data: ?(.*)$/m.exec(event)?.[1];
        if (kind === "serialized-error") onEnd(`error ${data}`);
        else if (!kind && data) onPage(JSON.parse(data), performance.now());
      }
    });
    res.on("end", () => onEnd("ended"));
    res.on("error", () => onEnd("error"));
  });
  req.on("error", (e) => {
    resolveOpened(0);
    onEnd(`request error ${e.message}`);
  });
  return { close: () => req.destroy(), opened };
}

function subscriptionWatcher(name: string, base: string, key: string, deliveries: Delivery[]) {
  const ends: string[] = [];
  const s = sseStream(
    base,
    key,
    { since: "now", types: ["lead"] },
    (page, at) => {
      for (const i of page.items) deliveries.push({ watcher: name, leadId: i.id, at });
    },
    (why) => ends.push(why),
  );
  return { close: s.close, opened: s.opened, ends };
}

// ---------------------------------------------------------------------------------------------------
// The waiters' child process: opens the waiters over `rampS`, re-arms the long-polls, answers stats.

interface WaiterStats {
  longPollsOpen: number;
  subscriptionsOpen: number;
  rearms: number;
  backoffs: number;
  failures: number;
  failureSamples: string[];
}

async function waiterChild(): Promise<void> {
  // The settings come as the first message (2,500 keys do not fit in a command line).
  const { base, keys, waiters, rampS, subscriptionsPerKey } = await new Promise<{
    base: string;
    keys: string[];
    waiters: number;
    rampS: number;
    subscriptionsPerKey: number;
  }>((resolve) => process.once("message", resolve as (m: unknown) => void));
  const agent = new http.Agent({ keepAlive: true, maxSockets: Number.POSITIVE_INFINITY });
  const stats: WaiterStats = {
    longPollsOpen: 0,
    subscriptionsOpen: 0,
    rearms: 0,
    backoffs: 0,
    failures: 0,
    failureSamples: [],
  };
  const fail = (why: string) => {
    stats.failures += 1;
    if (stats.failureSamples.length < 5) stats.failureSamples.push(why);
  };
  let stopping = false;
  const closers: (() => void)[] = [];

  const longPoll = (key: string) => {
    let since = "now";
    let current: http.ClientRequest | undefined;
    const arm = () => {
      if (stopping) return;
      const url = `${base}/public/v1/changes?limit=100&wait=${WAIT_S}&since=${encodeURIComponent(since)}`;
      stats.longPollsOpen += 1;
      current = http.get(url, { headers: { "X-API-Key": key }, agent }, (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => (body += c));
        res.on("end", () => {
          stats.longPollsOpen -= 1;
          if (stopping) return;
          try {
            const page = JSON.parse(body) as { nextSince?: string; backoff?: number };
            if (res.statusCode !== 200 || !page.nextSince) {
              fail(`long-poll ${res.statusCode}: ${body.slice(0, 200)}`);
              setTimeout(arm, 5_000);
              return;
            }
            since = page.nextSince;
            stats.rearms += 1;
            if (page.backoff) {
              stats.backoffs += 1;
              setTimeout(arm, page.backoff * 1000);
            } else arm();
          } catch (e) {
            fail(`long-poll body: ${(e as Error).message}`);
          }
        });
      });
      current.on("error", (e) => {
        stats.longPollsOpen -= 1;
        if (!stopping) fail(`long-poll error: ${e.message}`);
      });
    };
    arm();
    closers.push(() => current?.destroy());
  };

  const subscription = (key: string) => {
    stats.subscriptionsOpen += 1;
    let ended = false;
    const s = sseStream(
      base,
      key,
      { since: "now" },
      () => {},
      (why) => {
        if (ended) return;
        ended = true;
        stats.subscriptionsOpen -= 1;
        if (!stopping) fail(`subscription ${why}`);
      },
      agent,
    );
    void s.opened.then((status) => status !== 200 && fail(`subscription status ${status}`));
    closers.push(s.close);
  };

  // Two waiters per key: a long-poll and a subscription (the per-key cap); the keys in turn.
  const plan = Array.from({ length: waiters }, (_, i) => ({ key: keys[Math.floor(i / 2) % keys.length]!, i }));
  const gap = (rampS * 1000) / Math.max(1, plan.length);
  let next = 0;
  const opener = setInterval(
    () => {
      const due = Math.min(plan.length, Math.ceil((Date.now() - t0) / gap));
      for (; next < due; next++) (plan[next]!.i % 2 < subscriptionsPerKey ? subscription : longPoll)(plan[next]!.key);
      if (next >= plan.length) clearInterval(opener);
    },
    Math.max(5, Math.floor(gap)),
  );
  const t0 = Date.now();
  process.on("message", (m: { cmd: string }) => {
    if (m.cmd === "stats") process.send!({ stats, opened: next });
    if (m.cmd === "stop") {
      stopping = true;
      clearInterval(opener);
      for (const c of closers) c();
      agent.destroy();
      process.send!({ stopped: true }, () => process.exit(0));
    }
  });
  process.send!({ ready: true });
}

function ask<T>(child: ChildProcess, cmd: string, key: string): Promise<T> {
  return new Promise((resolve) => {
    const on = (m: Record<string, unknown>) => {
      if (key in m) {
        child.off("message", on);
        resolve(m as T);
      }
    };
    child.on("message", on);
    child.send({ cmd });
  });
}

// ---------------------------------------------------------------------------------------------------

async function metric(name: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${ports.metricsA}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`));
  return line ? Number(line.split(" ").at(-1)) : Number.NaN;
}

/** GET /me at `meConnections` for `meDuration` s: latencies (2xx), and the connections the database held meanwhile. */
async function meLoad(
  base: string,
  key: string,
  connections: () => Promise<number>,
): Promise<{ p50: number; p99: number; rps: number; non2xx: number; dbConnectionsMax: number }> {
  const latencies: number[] = [];
  let dbMax = 0;
  const sampler = setInterval(() => void connections().then((n) => (dbMax = Math.max(dbMax, n))), 500);
  const tracker = autocannon({
    url: `${base}/public/v1/me`,
    connections: settings.meConnections,
    duration: settings.meDuration,
    headers: { "X-API-Key": key },
  });
  (tracker as unknown as NodeJS.EventEmitter).on("response", (_c: unknown, status: number, _b: number, ms: number) => {
    if (status >= 200 && status < 300) latencies.push(ms);
  });
  const r = await tracker;
  clearInterval(sampler);
  dbMax = Math.max(dbMax, await connections());
  const p = percentiles(latencies);
  return { p50: p.p50, p99: p.p99, rps: r.requests.average, non2xx: r.non2xx, dbConnectionsMax: dbMax };
}

const ms = (v: number) => (Number.isFinite(v) ? v.toFixed(1) : "–");

export async function changesMain(): Promise<void> {
  const dbName = `${cfg.dbName}_changes`;
  const url = dbUrl(cfg.pgBase, dbName);
  const admin = new pg.Client({ connectionString: cfg.pgBase });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`);
  await admin.query(`CREATE DATABASE "${dbName}"`);
  log(`database ${dbName}: migrate, load ${settings.keys} idle keys over ${IDLE_TENANTS} tenants`);
  const db = await openPostgres(url);
  await migrate(db.sql);
  const unlimited = { perMinute: 1_000_000_000, perDay: 1_000_000_000 };
  const owner = (ref: string) => [{ ref: "ana", id: randomUUID(), name: "Ana", email: `ana@${ref}.test` }];
  const perTenant = Math.ceil(settings.keys / IDLE_TENANTS);
  const loaded = await loadFixture(db, {
    tenants: [
      {
        ref: "writer",
        rateLimit: unlimited,
        users: owner("writer"),
        apiKeys: ["a1", "a2", "b1", "b2", "w"].map((ref) => ({ ref, owner: "ana" })),
      },
      ...Array.from({ length: IDLE_TENANTS }, (_, t) => ({
        ref: `idle${t}`,
        rateLimit: unlimited,
        users: owner(`idle${t}`),
        apiKeys: Array.from({ length: perTenant }, (_, k) => ({ ref: `k${k}`, owner: "ana" })),
      })),
    ],
  });
  await db.close();
  const wk = loaded.tenants.writer!.apiKeys;
  const idleKeys = Array.from({ length: IDLE_TENANTS }, (_, t) =>
    Object.values(loaded.tenants[`idle${t}`]!.apiKeys).map((k) => k.key),
  )
    .flat()
    .slice(0, settings.keys);

  const svc = await serviceCommand(log, cfg.nodeFlags);
  const env = (port: number, extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv => ({
    ...process.env,
    DATABASE_URL: url,
    REDIS_URL: cfg.redisUrl,
    PORT: String(port),
    HOST: "127.0.0.1",
    LOG_LEVEL: process.env.BENCH_LOG_LEVEL || "warn",
    NODE_ENV: "production",
    NO_DEMO: "1",
    ...extra,
  });
  const a = startProcess({
    name: "instance A",
    cwd: ROOT,
    port: ports.a,
    args: svc.args,
    env: env(ports.a, {
      CHANGES_MAX_WAITERS: String(settings.waiters + 100),
      METRICS_PORT: String(ports.metricsA),
    }),
  });
  const b = startProcess({ name: "instance B", cwd: ROOT, port: ports.b, args: svc.args, env: env(ports.b) });
  const procs: Proc[] = [a, b];
  /** The database's connections but the benchmark's own: all of them, or those not idle (in use). */
  const connections = async (inUse: boolean) =>
    Number(
      (
        await admin.query<{ n: string }>(
          `SELECT count(*) AS n FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()${inUse ? " AND state <> 'idle'" : ""}`,
          [dbName],
        )
      ).rows[0]!.n,
    );
  const dbConnections = () => connections(false);
  const busyConnections = () => connections(true);
  const out: Record<string, unknown> = { settings, service: svc.label };
  try {
    await Promise.all([waitReady(a, "/readyz"), waitReady(b, "/readyz")]);

    // --- 3. latency -------------------------------------------------------------------------------
    log(`latency: ${settings.writes} leads created on A, followed by a long-poll and a subscription on A and on B`);
    const deliveries: Delivery[] = [];
    const lpA = longPollChain("long-poll, one instance", a.url, wk.a1!.key, deliveries);
    const lpB = longPollChain("long-poll, two instances", b.url, wk.b1!.key, deliveries);
    const subA = subscriptionWatcher("subscription, one instance", a.url, wk.a2!.key, deliveries);
    const subB = subscriptionWatcher("subscription, two instances", b.url, wk.b2!.key, deliveries);
    await Promise.all([subA.opened, subB.opened]);
    // Every watcher is waiting before the first write (a warm-up write is not measured).
    await new Promise((r) => setTimeout(r, 1500));
    const sent = new Map<string, number>();
    const postLatencies: number[] = [];
    for (let i = 0; i < settings.writes; i++) {
      const t0 = performance.now();
      const r = await fetch(`${a.url}/public/v1/leads`, {
        method: "POST",
        headers: { "X-API-Key": wk.w!.key, "Content-Type": "application/json" },
        body: JSON.stringify({ customerName: `Lead ${i}`, customerPhone: "+34600000001" }),
      });
      const body = (await r.json()) as { id: string };
      if (r.status !== 201) throw new Error(`create ${r.status}: ${JSON.stringify(body)}`);
      sent.set(body.id, t0);
      postLatencies.push(performance.now() - t0);
      // 4–6 writes a second, at uneven intervals (a steady beat would line up with the probe's tick).
      await new Promise((res) => setTimeout(res, 150 + Math.random() * 100));
    }
    // Every watcher has every write (or 10 s pass).
    const watchers = [
      "long-poll, one instance",
      "long-poll, two instances",
      "subscription, one instance",
      "subscription, two instances",
    ];
    const deadline = Date.now() + 10_000;
    while (
      Date.now() < deadline &&
      watchers.some((w) => deliveries.filter((d) => d.watcher === w).length < settings.writes)
    )
      await new Promise((r) => setTimeout(r, 100));
    await Promise.all([lpA.stop(), lpB.stop()]);
    for (const e of [...lpA.errors, ...lpB.errors]) throw new Error(`a long-poll chain failed: ${e}`);
    subA.close();
    subB.close();
    const latency = watchers.map((w) => {
      const mine = deliveries.filter((d) => d.watcher === w);
      const seen = new Set(mine.map((d) => d.leadId));
      const samples = mine.filter((d) => sent.has(d.leadId)).map((d) => (d.at - sent.get(d.leadId)!) / 1000);
      const p = percentiles(samples);
      return {
        watcher: w,
        delivered: seen.size,
        missing: [...sent.keys()].filter((id) => !seen.has(id)).length,
        repeated: mine.length - seen.size,
        p50S: p.p50,
        p99S: p.p99,
        maxS: p.max,
        pass: p.p50 <= 1 && p.p99 <= 2 && seen.size === settings.writes && mine.length === seen.size,
      };
    });
    out.latency = latency;
    out.postLeadsMs = percentiles(postLatencies);
    for (const l of latency)
      log(
        `  ${l.watcher.padEnd(28)} delivered ${l.delivered}/${settings.writes}, p50 ${(l.p50S * 1000).toFixed(0)} ms, p99 ${(l.p99S * 1000).toFixed(0)} ms, max ${(l.maxS * 1000).toFixed(0)} ms`,
      );
    await b.stop();

    // --- 4. idle waiters on A -----------------------------------------------------------------------
    const meKey = wk.w!.key;
    log(`GET /me at ${settings.meConnections} connections, ${settings.meDuration} s, without waiters (warm-up first)`);
    await meLoad(a.url, meKey, dbConnections);
    const rssIdle = memory(a.pid).rss;
    const before = await meLoad(a.url, meKey, dbConnections);
    log(`  p99 ${ms(before.p99)} ms, ${before.rps.toFixed(0)} req/s, db connections ≤ ${before.dbConnectionsMax}`);

    log(`${settings.waiters} waiters over ${settings.keys} keys, opened over ${settings.rampS} s`);
    const child = fork(fileURLToPath(import.meta.url), ["--waiters"], {
      execArgv: ["--import", "tsx"],
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    child.send({
      base: a.url,
      keys: idleKeys,
      waiters: settings.waiters,
      rampS: settings.rampS,
      subscriptionsPerKey: settings.subscriptionsPerKey,
    });
    await new Promise<void>((r) => child.once("message", () => r()));
    const held = async () => metric("crm_changes_waiters");
    const holdDeadline = Date.now() + (settings.rampS + 60) * 1000;
    while (Date.now() < holdDeadline && (await held()) < settings.waiters) await new Promise((r) => setTimeout(r, 250));
    const heldAtRamp = await held();
    const connectionsIdle = await dbConnections();
    // Let the first long-polls reach their bound, so the load below runs with re-arms going on.
    log(`  ${heldAtRamp} held; steady state for ${WAIT_S} s (the long-polls re-arm at their bound)`);
    const rssSamples: number[] = [];
    const rssTimer = setInterval(() => rssSamples.push(memory(a.pid).rss), 200);
    const cpu0 = cpuSeconds(a.pid);
    const s0 = (await ask<{ stats: WaiterStats }>(child, "stats", "stats")).stats;
    const t0 = Date.now();
    // While only the waiters run: the connections in use (not idle) every 100 ms. The probe reads one
    // tenant's feed state at a time; a waiter holds none.
    let busyMax = 0;
    const busyTimer = setInterval(() => void busyConnections().then((n) => (busyMax = Math.max(busyMax, n))), 100);
    await new Promise((r) => setTimeout(r, WAIT_S * 1000));
    clearInterval(busyTimer);
    // A heap snapshot of instance A with its waiters (BENCH_NODE_FLAGS=--heapsnapshot-signal=SIGHUP).
    if (process.env.BENCH_CHANGES_SNAPSHOT === "1") {
      a.child.kill("SIGHUP");
      await new Promise((r) => setTimeout(r, 20_000));
    }
    const during = await meLoad(a.url, meKey, dbConnections);
    const s1 = (await ask<{ stats: WaiterStats }>(child, "stats", "stats")).stats;
    const windowS = (Date.now() - t0) / 1000;
    const cpuPerS = (cpuSeconds(a.pid) - cpu0) / windowS;
    const heldAtEnd = await held();
    // Where the service's memory is with the waiters (prom-client's process metrics), in MiB.
    const heap = {
      usedMiB: (await metric("crm_nodejs_heap_size_used_bytes")) / 2 ** 20,
      totalMiB: (await metric("crm_nodejs_heap_size_total_bytes")) / 2 ** 20,
      externalMiB: (await metric("crm_nodejs_external_memory_bytes")) / 2 ** 20,
    };
    const refused = await metric("crm_changes_waits_refused_total");
    clearInterval(rssTimer);
    const rssMax = Math.max(...rssSamples);
    await ask(child, "stop", "stopped");
    log(
      `  p99 ${ms(during.p99)} ms, ${during.rps.toFixed(0)} req/s; RSS ≤ ${rssMax.toFixed(0)} MiB (heap ${heap.usedMiB.toFixed(0)} of ${heap.totalMiB.toFixed(0)} MiB, external ${heap.externalMiB.toFixed(0)} MiB); re-arms ${((s1.rearms - s0.rearms) / windowS).toFixed(0)}/s`,
    );

    // Waiters gone: wait for the instance to let them go, then GET /me again.
    const goneDeadline = Date.now() + 30_000;
    while (Date.now() < goneDeadline && (await held()) > 0) await new Promise((r) => setTimeout(r, 250));
    const after = await meLoad(a.url, meKey, dbConnections);
    log(`  without again: p99 ${ms(after.p99)} ms, ${after.rps.toFixed(0)} req/s`);
    const withoutP99 = (before.p99 + after.p99) / 2;
    const idle = {
      waiters: settings.waiters,
      keys: settings.keys,
      heldAtRamp,
      heldAtEnd,
      refused,
      waiterFailures: s1.failures,
      failureSamples: s1.failureSamples,
      backoffs: s1.backoffs,
      rearmsPerS: (s1.rearms - s0.rearms) / windowS,
      serviceCpuPerS: cpuPerS,
      rssIdleMiB: rssIdle,
      rssMaxMiB: rssMax,
      heap,
      dbConnections: {
        before: before.dbConnectionsMax,
        idleWithWaiters: connectionsIdle,
        busyWithWaitersMax: busyMax,
        during: during.dbConnectionsMax,
        after: after.dbConnectionsMax,
      },
      me: { before, during, after },
      p99Ratio: during.p99 / withoutP99,
    };
    out.idle = idle;

    const targets = [
      ...latency.map((l) => ({
        what: `commit-to-delivery, ${l.watcher}: p50 ≤ 1 s, p99 ≤ 2 s, every write once`,
        value: `p50 ${(l.p50S * 1000).toFixed(0)} ms, p99 ${(l.p99S * 1000).toFixed(0)} ms; ${l.delivered}/${settings.writes}, ${l.repeated} repeated`,
        pass: l.pass,
      })),
      {
        what: `${settings.waiters} idle waiters held (${settings.keys} keys), none refused or failed`,
        value: `${heldAtEnd} held at the end, ${refused} refused, ${s1.failures} failed`,
        pass: heldAtEnd >= settings.waiters && refused === 0 && s1.failures === 0,
      },
      {
        what: "0 extra database connections with the waiters: none in use by them (the probe's one statement at a time), the pool no larger than GET /me alone makes it",
        value: `in use while only the waiters ran ≤ ${busyMax}; open: GET /me alone ≤ ${before.dbConnectionsMax}, waiters alone ${connectionsIdle}, both ≤ ${during.dbConnectionsMax}`,
        pass: busyMax <= 1 && during.dbConnectionsMax <= Math.max(before.dbConnectionsMax, after.dbConnectionsMax),
      },
      {
        what: `service RSS with the waiters ≤ ${settings.rssTargetMiB} MiB`,
        value: `${rssMax.toFixed(0)} MiB (${rssIdle.toFixed(0)} MiB before)`,
        pass: rssMax <= settings.rssTargetMiB,
      },
      {
        what: "GET /me p99 with the waiters ≤ 1.5× without (mean of before and after)",
        value: `${ms(during.p99)} ms ÷ ${ms(withoutP99)} ms = ${idle.p99Ratio.toFixed(2)}×`,
        pass: idle.p99Ratio <= 1.5,
      },
    ];
    out.targets = targets;
    const date = new Date().toISOString().slice(0, 10);
    const file = cfg.out ?? path.join(ROOT, "bench/results", `${date}-changes.md`);
    const md = [
      `# Changes within a second — ${date}${process.env.BENCH_LABEL ? ` (${process.env.BENCH_LABEL})` : ""}`,
      "",
      `\`BENCH_CHANGES=1 npm run bench\` (bench/changes.ts), one machine (${cfg.cores} cores): PostgreSQL, Redis, two service instances, the load generators.`,
      `Service: ${svc.label}.`,
      "",
      "## Targets",
      "",
      "| criterion | measured | |",
      "|---|---|---|",
      ...targets.map((t) => `| ${t.what} | ${t.value} | ${t.pass ? "PASS" : "FAIL"} |`),
      "",
      "## Commit-to-delivery",
      "",
      `${settings.writes} leads created on instance A at 4–6 a second; each measured from the moment its POST was sent (the commit is later: an upper bound). POST /leads itself: p50 ${ms((out.postLeadsMs as { p50: number }).p50)} ms, p99 ${ms((out.postLeadsMs as { p99: number }).p99)} ms.`,
      "",
      "| follower | delivered | repeated | p50 | p99 | max |",
      "|---|---:|---:|---:|---:|---:|",
      ...latency.map(
        (l) =>
          `| ${l.watcher} | ${l.delivered} | ${l.repeated} | ${(l.p50S * 1000).toFixed(0)} ms | ${(l.p99S * 1000).toFixed(0)} ms | ${(l.maxS * 1000).toFixed(0)} ms |`,
      ),
      "",
      "## Idle waiters on one instance",
      "",
      `${settings.waiters} waiters over ${settings.keys} keys of ${IDLE_TENANTS} idle tenants (a long-poll with wait=${WAIT_S} re-armed at its bound and a subscription per key), opened over ${settings.rampS} s, held ${WAIT_S} s before and through GET /me at ${settings.meConnections} connections for ${settings.meDuration} s.`,
      "",
      "| | GET /me p50 | p99 | req/s | database connections (max) |",
      "|---|---:|---:|---:|---:|",
      ...(["before", "during", "after"] as const).map((k) => {
        const m = idle.me[k];
        const label = {
          before: "without waiters",
          during: `with ${settings.waiters} waiters`,
          after: "without, again",
        }[k];
        return `| ${label} | ${ms(m.p50)} ms | ${ms(m.p99)} ms | ${m.rps.toFixed(0)} | ${m.dbConnectionsMax} |`;
      }),
      "",
      `- Waiters held: ${heldAtRamp} after the ramp, ${heldAtEnd} at the end; refused ${refused}; client failures ${s1.failures}${s1.failureSamples.length ? ` (${s1.failureSamples.join("; ")})` : ""}; backoffs ${s1.backoffs}.`,
      `- Re-arm rate: ${idle.rearmsPerS.toFixed(0)} long-polls answered and re-armed a second; the service's CPU meanwhile ${(cpuPerS * 100).toFixed(0)} % of a core (GET /me load included).`,
      `- Database connections with the waiters alone: ${connectionsIdle} open (the pool's, left by the GET /me run before), at most ${busyMax} in use (sampled every 100 ms for ${WAIT_S} s).`,
      `- Service RSS: ${rssIdle.toFixed(0)} MiB before the waiters, at most ${rssMax.toFixed(0)} MiB with them (V8 heap ${heap.usedMiB.toFixed(0)} MiB used of ${heap.totalMiB.toFixed(0)}, external ${heap.externalMiB.toFixed(0)} MiB, at the end).`,
      "",
    ].join("\n");
    writeFileSync(file, md);
    writeFileSync(file.replace(/\.md$/, ".json"), `${JSON.stringify(out, null, 2)}\n`);
    log(`results: ${path.relative(ROOT, file)}`);
    for (const t of targets) log(`  ${t.pass ? "PASS" : "FAIL"} ${t.what}: ${t.value}`);
    if (targets.some((t) => !t.pass)) process.exitCode = 1;
  } finally {
    for (const p of procs) await p.stop();
    if (!cfg.keepDb) await admin.query(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`);
    await admin.end();
  }
}

if (process.argv[2] === "--waiters") void waiterChild();
