// Drill 9 — scale-out topology (issue 14). On this machine: PostgreSQL (max_connections 25),
// PgBouncer 1.18 in transaction mode (15 server connections, statement_timeout by connect_query),
// a Redis Cluster of 3 masters with a replica each, and four service instances (pool of 10 each:
// 40 client connections, more than PostgreSQL admits). Mixed traffic for 60 s (DRILL_SCALE):
//   • reads (leads, contacts, tickets, /me) round-robin over the instances;
//   • creates (leads, contacts) with an Idempotency-Key, sent to one instance and retried at the
//     next one, and retried across instances until acknowledged when an answer is a 503 or lost;
//   • rounds of 8 bookings racing for one slot over the four instances;
//   • a 30/min key hammered across the instances before the faults (exact ±0), and a second one
//     across the Redis failover, whose window is read from Redis itself: exact before the kill; while
//     the slot has no master each instance counts in memory (tolerance: instances × ceiling); once
//     every instance's request moves the counter in Redis again ("shared again", probed one instance
//     at a time with the hammer paused), no more admissions than the one shared ceiling leaves, and
//     after the traffic every request still counted in Redis;
// At 1/3 PgBouncer is restarted; at 0.6 the Redis master serving the second quota key's slot is
// killed (its replica takes over). Targets: no 500; 503s only while PgBouncer is away; every
// acknowledged create and booking in the database, no duplicate create, no double booking; every
// instance serves again after each fault without a restart; and every instance's /metrics agrees
// with the drill's own per-instance counts (requests, 5xx, 429, replays).
// DRILL9_BREAK_QUOTA_SHARING=1 breaks the sharing on purpose (the drill's self-test): at the kill,
// every Redis node refuses scripts (ACL), so the instances count in memory through and after the
// failover; the quota checks must then fail.
import calculateSlot from "cluster-key-slot";
import { createHash } from "node:crypto";
import { Redis } from "ioredis";
import pg from "pg";
import { redisQuotaKeys } from "../server/limits/quotas.js";
import { bookingDay, checkBookings, raceForSlot, slotOf, type BookingRound } from "./lib/bookings.js";
import { load, richTenant } from "./lib/fixture.js";
import { Client, pool, Tally, type ReqOpts, type Res } from "./lib/http.js";
import { startPgBouncer } from "./lib/pgbouncer.js";
import { startPostgres } from "./lib/postgres.js";
import { freePort } from "./lib/proc.js";
import { startRedisCluster } from "./lib/redis-cluster.js";
import { Report, type Drill } from "./lib/result.js";
import { sleep } from "./lib/scope.js";
import { startService, type Service } from "./lib/service.js";

const INSTANCES = 4;
const PG_MAX_CONNECTIONS = 25;
const BOUNCER_POOL = 15;
const Q = 30; // per-minute ceiling of the quota keys
const BOOKERS = 8;
const RECOVERY_TARGET_S = 10;
const BREAK_SHARING = process.env.DRILL9_BREAK_QUOTA_SHARING === "1";

interface Create {
  n: number;
  kind: "lead" | "contact";
  idem: string;
  marker: string;
  ids: Set<string>;
  attempts: number;
}

/** An answer of the failover quota key: the instance and the phase it was sent in. */
interface QuotaAnswer {
  res: Res;
  inst: number;
  /** before the kill; while the slot had no master or not every instance counted in Redis; after that; the final probes. */
  phase: "before" | "failover" | "after" | "final";
}

interface Round extends BookingRound {
  r: number;
}

export const drill9: Drill = {
  id: 9,
  name: "scale topology",
  async run({ scope, log, scale }) {
    const tallies = Array.from({ length: INSTANCES }, () => new Tally());
    const report = new Report(tallies);
    const durationMs = Math.round(60_000 * scale);

    // ── topology ────────────────────────────────────────────────────────────────────────────
    const pgc = await startPostgres(scope, { maxConnections: PG_MAX_CONNECTIONS });
    const directUrl = await pgc.createDatabase("drill9");
    const bouncer = await startPgBouncer(scope, {
      serverPort: pgc.port,
      poolSize: BOUNCER_POOL,
      statementTimeoutMs: 5000,
    });
    const cluster = await startRedisCluster(scope, { masters: 3, replicasPerMaster: 1, nodeTimeoutMs: 2000 });
    log(
      `postgres :${pgc.port} (max_connections ${PG_MAX_CONNECTIONS}), pgbouncer :${bouncer.port}, redis cluster ${cluster.seeds}`,
    );
    const ids = await load(directUrl, {
      tenants: [
        richTenant("s"),
        richTenant("q1", { rateLimit: { perMinute: Q, perDay: 1_000_000 } }),
        richTenant("q2", { rateLimit: { perMinute: Q, perDay: 1_000_000 } }),
      ],
    });
    const s = ids.tenants.s!;
    const key = s.apiKeys.full!.key;
    const q1Key = ids.tenants.q1!.apiKeys.full!.key;
    const q2Key = ids.tenants.q2!.apiKeys.full!.key;
    const env = {
      DATABASE_URL: bouncer.url("drill9"),
      DIRECT_DATABASE_URL: directUrl,
      REDIS_CLUSTER_NODES: cluster.seeds,
    };
    const metricsPorts: number[] = [];
    const services: Service[] = [];
    for (let i = 0; i < INSTANCES; i++) {
      const metricsPort = await freePort();
      metricsPorts.push(metricsPort);
      services.push(
        await startService(scope, `d9-${"abcd"[i]}`, { ...env, METRICS_PORT: String(metricsPort), LOG_LEVEL: "info" }),
      );
    }
    const clients = services.map((svc, i) => new Client(svc.url, tallies[i]!, { maxSockets: 64 }));
    scope.defer("close clients", () => {
      for (const c of clients) c.close();
    });
    const replays = services.map(() => 0);
    const unavailable: number[] = []; // start times of the 503 answers
    const send = async (i: number, method: string, path: string, opts: ReqOpts = {}): Promise<Res> => {
      const inst = ((i % INSTANCES) + INSTANCES) % INSTANCES;
      const res = await clients[inst]!.request(method, path, { timeoutMs: 30_000, ...opts });
      if (res.headers["idempotent-replayed"] === "true") replays[inst]! += 1;
      if (res.status === 503) unavailable.push(res.startedAt);
      return res;
    };
    const db = new pg.Client({ connectionString: directUrl });
    await db.connect();
    scope.defer("close db", () => db.end());
    const timeouts = services.map((svc) =>
      svc.logs.map((l) => /"statementTimeout":"([^"]+)"/.exec(l)?.[1]).find(Boolean),
    );
    report.check(
      timeouts.every((t) => t === "5s"),
      `statement_timeout seen through PgBouncer: ${timeouts.join(",")} (want 5s from connect_query)`,
    );

    // Warm-up, not timed: each instance compiles its query shapes once.
    await pool(INSTANCES * 4, 4, (i) => send(i, "GET", "/public/v1/leads", { key, query: { limit: 5 } }));

    // ── observers: PgBouncer pools, PostgreSQL backends ───────────────────────────────────────
    let peakClients = 0;
    let peakServers = 0;
    let peakBackends = 0;
    let observing = true;
    const observer = (async () => {
      const direct = new pg.Client({ connectionString: pgc.url() });
      direct.on("error", () => {});
      await direct.connect().catch(() => {});
      while (observing) {
        try {
          for (const row of await bouncer.admin("SHOW POOLS")) {
            if (row.database !== "drill9") continue;
            peakClients = Math.max(peakClients, Number(row.cl_active) + Number(row.cl_waiting));
            peakServers = Math.max(
              peakServers,
              Number(row.sv_active) +
                Number(row.sv_idle) +
                Number(row.sv_used) +
                Number(row.sv_tested) +
                Number(row.sv_login),
            );
          }
        } catch {
          /* PgBouncer restarting */
        }
        try {
          const r = await direct.query(
            `SELECT count(*)::int AS n FROM pg_stat_activity WHERE backend_type = 'client backend'`,
          );
          peakBackends = Math.max(peakBackends, r.rows[0].n);
        } catch {
          /* ignore */
        }
        await sleep(250);
      }
      await direct.end().catch(() => {});
    })();

    // ── traffic ───────────────────────────────────────────────────────────────────────────────
    const t0 = Date.now();
    const deadline = t0 + durationMs;
    let running = true;
    const workers: Promise<void>[] = [];

    // Reads.
    const reads: [string, ReqOpts["query"]][] = [
      ["/public/v1/leads", { limit: 10 }],
      ["/public/v1/me", undefined],
      ["/public/v1/contacts", { limit: 5 }],
      ["/public/v1/tickets", { limit: 5 }],
    ];
    for (let w = 0; w < 6; w++)
      workers.push(
        (async () => {
          for (let n = w; running; n += 6) {
            const [path, query] = reads[n % reads.length]!;
            await send(n, "GET", path, { key, query });
            await sleep(5);
          }
        })(),
      );

    // Creates with Idempotency-Key: first at instance n, the retry at n+1, then across instances
    // until acknowledged (a 503 while PgBouncer is away, or a lost answer).
    const creates: Create[] = [];
    let createSeq = 0;
    const createOnce = async (c: Create, at: number): Promise<Res> => {
      const body =
        c.kind === "lead"
          ? { customerName: `Scale lead ${c.n}`, customerPhone: "+34600555000", notes: c.marker }
          : { fullName: c.marker, phone: `+3461${String(c.n).padStart(7, "0")}` };
      c.attempts += 1;
      const res = await send(at, "POST", c.kind === "lead" ? "/public/v1/leads" : "/public/v1/contacts", {
        key,
        body,
        headers: { "Idempotency-Key": c.idem },
      });
      if (res.status === 201 && res.body?.id) c.ids.add(res.body.id);
      return res;
    };
    for (let w = 0; w < 6; w++)
      workers.push(
        (async () => {
          while (running) {
            const n = createSeq++;
            const c: Create = {
              n,
              kind: n % 2 ? "contact" : "lead",
              idem: `scale-${n}`,
              marker: `scale-${n}`,
              ids: new Set(),
              attempts: 0,
            };
            creates.push(c);
            await createOnce(c, n);
            let acked = c.ids.size > 0;
            const retry = await createOnce(c, n + 1); // the client's retry, at another instance
            acked ||= retry.status === 201;
            for (let a = 2; !acked && a < 60; a++) {
              await sleep(250);
              const r = await createOnce(c, n + a);
              acked = r.status === 201;
              if (r.status >= 400 && r.status < 500) break;
            }
            await sleep(10);
          }
        })(),
      );

    // Bookings racing for one slot.
    const rounds: Round[] = [];
    const day = bookingDay(7);
    workers.push(
      (async () => {
        for (let r = 0; running; r++) {
          const round: Round = { r, ...slotOf(day, r), results: [] };
          rounds.push(round);
          round.results = await raceForSlot(round, BOOKERS, s.users.ana!, `Scale booking ${r}`, (b, body) =>
            send(b, "POST", "/public/v1/appointments", { key, body }),
          );
          await sleep(1000);
        }
      })(),
    );

    // Quota keys hammered across the instances.
    const hammer = (k: string, from: number, to: number, out: Res[]) =>
      (async () => {
        await sleep(Math.max(0, from - Date.now()));
        for (let n = 0; running && Date.now() < to; n++) {
          out.push(await send(n, "GET", "/public/v1/me", { key: k }));
          await sleep(40);
        }
      })();
    const q1: Res[] = [];
    const pgbAt = t0 + Math.round(durationMs / 3);
    const q2From = t0 + Math.round(durationMs * 0.55);
    const killAtPlanned = t0 + Math.round(durationMs * 0.6);
    workers.push(hammer(q1Key, t0 + 2000, pgbAt - 3000, q1));
    // The failover key: like hammer(), but each answer keeps its instance and phase, and the loop can
    // be paused (with nothing in flight) while the drill probes the instances one by one.
    const q2: QuotaAnswer[] = [];
    let q2Phase: QuotaAnswer["phase"] = "before";
    let q2Paused = false;
    let q2InFlight = false;
    workers.push(
      (async () => {
        await sleep(Math.max(0, q2From - Date.now()));
        for (let n = 0; running && Date.now() < deadline - 2000; ) {
          if (q2Paused) {
            await sleep(10);
            continue;
          }
          q2InFlight = true;
          const inst = n % INSTANCES;
          const phase = q2Phase;
          q2.push({ res: await send(inst, "GET", "/public/v1/me", { key: q2Key }), inst, phase });
          q2InFlight = false;
          n++;
          await sleep(40);
        }
      })(),
    );

    // A burst that opens every instance's pool: 4 × 10 client connections on PgBouncer.
    await sleep(3000);
    await pool(INSTANCES * 16, INSTANCES * 16, (i) =>
      send(i, "GET", "/public/v1/leads", { key, query: { limit: 50 } }),
    );

    // ── fault 1: PgBouncer restart ───────────────────────────────────────────────────────────
    await sleep(Math.max(0, pgbAt - Date.now()));
    const pgbStop = Date.now();
    await bouncer.stop();
    await bouncer.start();
    const pgbUp = Date.now();
    log(`pgbouncer restarted (${pgbUp - pgbStop} ms down)`);
    const served = await firstServed(
      services.length,
      (i) => send(i, "GET", "/public/v1/leads", { key, query: { limit: 1 } }),
      pgbUp + 30_000,
    );
    const pgbRecovery = served === null ? null : (served - pgbUp) / 1000;
    log(`pgbouncer recovery ${pgbRecovery ?? "never"} s`);

    // ── fault 2: kill the Redis master of the second quota key's slot ───────────────────────────
    const q2Hash = createHash("sha256").update(q2Key).digest("hex");
    const q2MinuteKey = redisQuotaKeys("rl", q2Hash)[0];
    const slot = calculateSlot(q2MinuteKey);
    /** The failover key's minute window as Redis holds it (null while its slot has no reachable master). */
    const redisWindow = () => cluster.readCounter(q2MinuteKey).catch(() => null);
    await sleep(Math.max(0, killAtPlanned - Date.now()));
    const victim = await cluster.masterOf(slot);
    // Nothing of the key in flight across the kill: an answer is wholly before it or in the failover window.
    q2Paused = true;
    while (q2InFlight) await sleep(5);
    const atKill = await redisWindow();
    q2Phase = "failover";
    const killAt = Date.now();
    await cluster.kill(victim);
    q2Paused = false;
    log(`killed redis master :${victim} (slot ${slot}); its window held ${atKill?.n ?? "?"} requests`);
    if (BREAK_SHARING) {
      // The self-test: every live node refuses the quota scripts from now on (instances count in memory).
      for (const node of cluster.nodes.filter((x) => x.port !== victim)) {
        const r = new Redis({ port: node.port, host: "127.0.0.1", maxRetriesPerRequest: 0, retryStrategy: () => null });
        r.on("error", () => {});
        await r
          .call("ACL", "SETUSER", "default", "-@scripting")
          .catch((e) => log(`ACL on :${node.port}: ${(e as Error).message}`));
        r.disconnect();
      }
      log("DRILL9_BREAK_QUOTA_SHARING=1: every Redis node refuses scripts (quotas counted in memory)");
    }
    // One instance after the other, with the hammer paused: the instance's request must move the
    // window in Redis by exactly one (counted there, not in its memory). True per instance.
    const probeRound = async (): Promise<boolean[]> => {
      q2Paused = true;
      try {
        while (q2InFlight) await sleep(5);
        const shared: boolean[] = [];
        for (let i = 0; i < INSTANCES; i++) {
          const before = await redisWindow();
          const res = await send(i, "GET", "/public/v1/me", { key: q2Key });
          q2.push({ res, inst: i, phase: "failover" });
          const after = await redisWindow();
          shared.push(before !== null && after !== null && after.n - before.n === 1);
        }
        return shared;
      } finally {
        q2Paused = false;
      }
    };
    let failoverAt: number | null = null;
    let sharedAgainAt: number | null = null;
    let atShared: { n: number; pttlMs: number } | null = null;
    let sawFallback = false;
    let probeRounds = 0;
    let lastRound: boolean[] = [];
    while (Date.now() < killAt + 30_000 && sharedAgainAt === null) {
      if (failoverAt === null) {
        const master = await cluster.masterOf(slot).catch(() => victim);
        if (master !== victim) failoverAt = Date.now();
      }
      // The instances' own gauge: only whether they noticed (sharing is judged from Redis below).
      const states = await Promise.all(
        metricsPorts.map((p) =>
          scrape(p).then(
            (m) => m.value("crm_redis_fallback"),
            () => NaN,
          ),
        ),
      );
      if (states.some((v) => v === 1)) sawFallback = true;
      if (failoverAt !== null) {
        lastRound = await probeRound();
        probeRounds++;
        if (lastRound.every(Boolean)) {
          sharedAgainAt = Date.now();
          atShared = await redisWindow();
          q2Phase = "after";
        }
      }
      await sleep(200);
    }
    log(
      `redis failover ${failoverAt === null ? "never" : `${(failoverAt - killAt) / 1000} s`}, quotas shared again (read from Redis) ${sharedAgainAt === null ? `never (last probe round: ${lastRound.map((x, i) => `${services[i]!.name} ${x ? "in Redis" : "not in Redis"}`).join(", ")})` : `${(sharedAgainAt - killAt) / 1000} s`} after ${probeRounds} probe rounds`,
    );

    await sleep(Math.max(0, deadline - Date.now()));
    running = false;
    await Promise.all(workers);
    const elapsed = (Date.now() - t0) / 1000;
    observing = false;
    await observer;

    // The failover key after the traffic: two requests per instance, each must still be counted in
    // Redis (the window moves by exactly 2 × instances) and admitted only as far as the one shared
    // window (as Redis holds it) has room.
    const beforeFinal = await redisWindow();
    const finalAnswers: QuotaAnswer[] = [];
    for (let i = 0; i < 2 * INSTANCES; i++)
      finalAnswers.push({
        res: await send(i, "GET", "/public/v1/me", { key: q2Key }),
        inst: i % INSTANCES,
        phase: "final",
      });
    const afterFinal = await redisWindow();
    q2.push(...finalAnswers);

    // ── verification ─────────────────────────────────────────────────────────────────────────
    const all = tallies.reduce((n, t) => n + t.requests, 0);
    const statuses = new Map<number, number>();
    for (const t of tallies) for (const [st, n] of t.statuses) statuses.set(st, (statuses.get(st) ?? 0) + n);
    const fiveXX = [...statuses].filter(([st]) => st >= 500).reduce((n, [, c]) => n + c, 0);
    report.check((statuses.get(500) ?? 0) === 0, `${statuses.get(500)} × 500 INTERNAL_ERROR`);
    report.check((statuses.get(0) ?? 0) === 0, `${statuses.get(0)} requests without an HTTP answer`);

    // Creates: every acknowledged one in the database exactly once, no duplicate.
    const leadRows = new Map<string, number>();
    for (const r of (
      await db.query(`SELECT "notes" AS m, count(*)::int AS n FROM "Lead" WHERE "notes" LIKE 'scale-%' GROUP BY 1`)
    ).rows)
      leadRows.set(r.m, r.n);
    for (const r of (
      await db.query(
        `SELECT "fullName" AS m, count(*)::int AS n FROM "Contact" WHERE "fullName" LIKE 'scale-%' GROUP BY 1`,
      )
    ).rows)
      leadRows.set(r.m, r.n);
    const acked = creates.filter((c) => c.ids.size > 0);
    const missing = acked.filter((c) => !leadRows.get(c.marker)).length;
    const duplicates = creates.filter((c) => (leadRows.get(c.marker) ?? 0) > 1 || c.ids.size > 1).length;
    const unacked = creates.length - acked.length;
    report.check(missing === 0, `${missing} acknowledged creates missing from the database`);
    report.check(duplicates === 0, `${duplicates} creates duplicated`);
    report.check(
      unacked <= 6,
      `${unacked} creates never acknowledged after retries (at most the 6 in flight at the end)`,
    );

    // Bookings: at most one 201 per slot, every acknowledged booking stored, no overlap at all.
    const { doubleBookings, wonRounds } = await checkBookings(db, rounds, report, (x) => x.status === 503);
    report.check(wonRounds > 0, `no booking round won a slot (${rounds.length} rounds): the bookings checked nothing`);

    // 503 only while PgBouncer was away (until every instance served again, + 1 s of stragglers).
    const windowEnd = (served ?? pgbUp + 30_000) + 1000;
    const late503 = unavailable.filter((at) => at < pgbStop - 500 || at > windowEnd);
    report.check(
      late503.length === 0,
      `${late503.length} × 503 outside the PgBouncer restart (first at +${late503.length ? ((late503[0]! - t0) / 1000).toFixed(1) : 0} s)`,
    );

    // Quotas: exact before the faults; across the failover, judged from Redis's own counter.
    const admitted1 = q1.filter((r) => r.status === 200).length;
    const over1 = admitted1 - Q;
    report.check(
      over1 === 0,
      `quota before the faults admitted ${admitted1} of ${q1.length} at ceiling ${Q} (want exactly ${Q})`,
    );
    report.check(
      q1.every((r) => r.status === 200 || r.status === 429),
      `quota key 1 answered ${[...new Set(q1.map((r) => r.status))].join(",")}`,
    );
    const of = (phase: QuotaAnswer["phase"]) => q2.filter((a) => a.phase === phase);
    const ok = (xs: QuotaAnswer[]) => xs.filter((a) => a.res.status === 200).length;
    const [before2, failover2, after2, final2] = [of("before"), of("failover"), of("after"), of("final")];
    const admitted2 = ok(q2);
    // Before the kill: one shared window, exact (all admitted when fewer than the ceiling were sent).
    report.check(
      ok(before2) === Math.min(Q, before2.length),
      `quota key 2 before the kill admitted ${ok(before2)} of ${before2.length} (want ${Math.min(Q, before2.length)})`,
    );
    // The failover window (from the kill until every instance counts in Redis again): each instance
    // may count in its own memory — the stated tolerance is one ceiling per instance.
    report.check(
      ok(failover2) <= INSTANCES * Q,
      `quota key 2 admitted ${ok(failover2)} during the failover window (tolerance ${INSTANCES} × ${Q})`,
    );
    // Shared again: Redis's window at that moment leaves room for max(0, Q − n) more, for all
    // instances together — while that window lasts (its PTTL then; later answers belong to a new window).
    const sharedWindowEnd =
      sharedAgainAt !== null && atShared !== null && atShared.pttlMs > 0 ? sharedAgainAt + atShared.pttlMs - 500 : 0;
    const inWindow = (a: QuotaAnswer) => a.res.startedAt < sharedWindowEnd;
    const sharedRoom = atShared === null ? 0 : Math.max(0, Q - atShared.n);
    const afterInWindow = [...after2, ...final2].filter(inWindow);
    report.check(
      sharedAgainAt !== null,
      `quota key 2 never counted in Redis again by every instance after the failover (${probeRounds} probe rounds)`,
    );
    report.check(
      ok(afterInWindow) <= sharedRoom,
      `quota key 2 admitted ${ok(afterInWindow)} of ${afterInWindow.length} after the failover, one shared window left room for ${sharedRoom} (Redis held ${atShared?.n ?? "?"})`,
    );
    // And at the end, Redis itself still counts every request of every instance (unless its window
    // was about to end: then the count starts anew in between and the difference says nothing).
    const finalCounted = beforeFinal !== null && afterFinal !== null ? afterFinal.n - beforeFinal.n : null;
    report.check(
      (beforeFinal !== null && beforeFinal.pttlMs >= 0 && beforeFinal.pttlMs < 5000) ||
        finalCounted === finalAnswers.length,
      `Redis counted ${finalCounted ?? "?"} of the ${finalAnswers.length} requests sent to the ${INSTANCES} instances after the traffic (quotas not shared)`,
    );
    report.check(
      q2.every((a) => a.res.status === 200 || a.res.status === 429),
      `quota key 2 answered ${[...new Set(q2.map((a) => a.res.status))].join(",")}`,
    );

    // Recovery.
    const redisRecovery = sharedAgainAt === null ? null : (sharedAgainAt - killAt) / 1000;
    report.check(
      pgbRecovery !== null && pgbRecovery <= RECOVERY_TARGET_S,
      `instances not serving within ${RECOVERY_TARGET_S} s of PgBouncer's restart (${pgbRecovery ?? "never"})`,
    );
    report.check(failoverAt !== null, "the replica was not promoted within 30 s");
    report.check(sawFallback, "no instance reported the Redis fallback while the master was away");
    report.check(
      redisRecovery !== null && redisRecovery <= 20,
      `quotas not shared again within 20 s of the kill (${redisRecovery ?? "never"})`,
    );
    report.recoverySeconds = Math.max(pgbRecovery ?? Infinity, redisRecovery ?? Infinity);

    // Connections: more clients than PostgreSQL admits, multiplexed onto PgBouncer's pool.
    report.check(
      peakClients > PG_MAX_CONNECTIONS,
      `peak ${peakClients} client connections on PgBouncer, not more than max_connections ${PG_MAX_CONNECTIONS}`,
    );
    report.check(
      peakServers <= BOUNCER_POOL,
      `PgBouncer opened ${peakServers} server connections (pool ${BOUNCER_POOL})`,
    );

    // /metrics of each instance against the drill's own counts.
    const disagreements: string[] = [];
    let mRequests = 0;
    let m5xx = 0;
    let m429 = 0;
    let mReplays = 0;
    let mRejections = 0;
    for (let i = 0; i < INSTANCES; i++) {
      const m = await scrape(metricsPorts[i]!);
      // The instance's own health checks at start (startService polls /healthz) are not the drill's.
      const req = m.sum("crm_http_requests_total", (l) => l.route !== "/healthz");
      const fx = m.sum("crm_http_requests_total", (l) => Number(l.status) >= 500);
      const tooMany = m.sum("crm_http_requests_total", (l) => l.status === "429");
      const rep = m.sum("crm_idempotent_replays_total");
      const rej = m.sum("crm_rate_limit_rejections_total");
      const t = tallies[i]!;
      const c429 = t.statuses.get(429) ?? 0;
      const answered = t.requests - (t.statuses.get(0) ?? 0);
      const pairs: [string, number, number][] = [
        ["requests", req, answered],
        ["5xx", fx, t.fiveXX],
        ["429", tooMany, c429],
        ["rate-limit rejections", rej, c429],
        ["replays", rep, replays[i]!],
      ];
      for (const [what, server, client] of pairs)
        if (server !== client)
          disagreements.push(`${services[i]!.name} ${what}: /metrics ${server} vs drill ${client}`);
      mRequests += req;
      m5xx += fx;
      m429 += tooMany;
      mReplays += rep;
      mRejections += rej;
    }
    for (const d of disagreements.slice(0, 8)) report.fail(`metrics disagree: ${d}`);
    const replaysTotal = replays.reduce((a, b) => a + b, 0);

    // Error-level log lines: only the 503s of the PgBouncer restart may log one.
    const stray = services.flatMap((svc) =>
      svc.logs
        .map((line) => {
          try {
            return JSON.parse(line) as { level: number; time: number; msg: string; err?: { message?: string } };
          } catch {
            return undefined;
          }
        })
        .filter((j) => j && j.level >= 50 && (j.time < pgbStop - 500 || j.time > windowEnd))
        .map((j) => `${svc.name}: ${j!.msg} ${String(j!.err?.message ?? "").slice(0, 200)}`),
    );
    for (const line of stray.slice(0, 5)) report.fail(`error log outside the PgBouncer restart: ${line}`);

    report.figure(
      `${all} requests, ${(all / elapsed).toFixed(0)} req/s, 5xx ${fiveXX} (503 during the PgBouncer restart)`,
    );
    report.figure(`creates ${acked.length} acked / ${creates.length}: missing ${missing}, duplicates ${duplicates}`);
    report.figure(
      `bookings ${wonRounds} slots won of ${rounds.length} rounds × ${BOOKERS}: double bookings ${doubleBookings}`,
    );
    report.figure(
      `quota over-admission ${over1} steady; failover key ${admitted2} admitted of ${q2.length} (ceiling ${Q}): before the kill ${ok(before2)}/${before2.length}, failover window ${ok(failover2)}/${failover2.length}, after ${ok(after2)}/${after2.length}, final ${ok(final2)}/${final2.length}; Redis counted ${finalCounted ?? "?"}/${finalAnswers.length} final requests`,
    );
    report.figure(
      `recovery pgbouncer ${pgbRecovery?.toFixed(2) ?? "-"} s, redis failover ${failoverAt === null ? "-" : ((failoverAt - killAt) / 1000).toFixed(2)} s / quotas shared ${redisRecovery?.toFixed(2) ?? "-"} s`,
    );
    report.figure(
      `connections: ${peakClients} clients → ${peakServers} servers (PostgreSQL max ${PG_MAX_CONNECTIONS}, peak backends ${peakBackends})`,
    );
    report.figure(
      `/metrics ${disagreements.length ? "DISAGREE" : "agree"}: ${mRequests} requests, ${m5xx} 5xx, ${m429} 429 (${mRejections} rejections), ${mReplays} replays (drill ${replaysTotal})`,
    );
    return report.result({ allowed5xx: unavailable.length - late503.length });
  },
};

/** Sends probe(i) to every instance until each has answered 200 once; returns when the last did (or null at the deadline). */
async function firstServed(
  instances: number,
  probe: (i: number) => Promise<Res>,
  deadline: number,
): Promise<number | null> {
  const served: (number | null)[] = Array.from({ length: instances }, () => null);
  while (Date.now() < deadline && served.some((t) => t === null)) {
    await Promise.all(
      served.map(async (t, i) => {
        if (t !== null) return;
        if ((await probe(i)).status === 200) served[i] = Date.now();
      }),
    );
    if (served.some((t) => t === null)) await sleep(100);
  }
  return served.every((t) => t !== null) ? Math.max(...(served as number[])) : null;
}

interface Scraped {
  /** Sum of a metric's samples (optionally only those whose labels pass). */
  sum(name: string, where?: (labels: Record<string, string>) => boolean): number;
  /** The single value of an unlabelled metric. */
  value(name: string): number;
}

/** GET /metrics of an instance (Prometheus text format), parsed into samples. */
async function scrape(port: number): Promise<Scraped> {
  const res = await fetch(`http://127.0.0.1:${port}/metrics`, { signal: AbortSignal.timeout(2000) });
  if (!res.ok) throw new Error(`/metrics on :${port} answered ${res.status}`);
  const samples: { name: string; labels: Record<string, string>; value: number }[] = [];
  for (const line of (await res.text()).split("\n")) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!;
    samples.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return {
    sum: (name, where) =>
      samples.filter((x) => x.name === name && (!where || where(x.labels))).reduce((n, x) => n + x.value, 0),
    value: (name) => samples.find((x) => x.name === name)?.value ?? NaN,
  };
}
