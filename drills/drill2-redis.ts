// Drill 2 — Redis lost and back. Two instances share the drill's own Redis. Under steady load, Redis
// is stopped for DRILL_REDIS_OUTAGE_S (20 s) and a fresh one is started on the same port.
// Targets: zero 5xx and zero network errors; during the outage quotas fall back to per-instance
// memory limits (the documented behaviour: a key gets its ceiling at each instance) and /readyz says
// 503 (checks.redis "unavailable"); within 5 s of Redis returning every instance is ready again and
// the quota is shared again (exactly the ceiling across both), without a restart.
// Beside the load, a mirror of the load tenant's leads through long-polls (GET /changes?wait, each
// poll on the next instance) and one through the tRPC subscription (on one instance, reconnecting to
// the next with lastEventId when its stream ends), over three instances: a third one, serving only
// the mirrors, is killed (SIGKILL) as Redis goes. At the end both mirrors equal the database's rows,
// every acknowledged create among them, and the subscription delivered each lead once.
import { richTenant, load } from "./lib/fixture.js";
import pg from "pg";
import { Client, percentile, pool, Tally } from "./lib/http.js";
import { FeedMirror, keyOf, rowsDiff, StreamMirror } from "./lib/mirror.js";
import { Poller, SteadyLoad } from "./lib/load.js";
import { startPostgres } from "./lib/postgres.js";
import { startRedis } from "./lib/redis.js";
import { Report, type Drill } from "./lib/result.js";
import { sleep } from "./lib/scope.js";
import { startService, startServices } from "./lib/service.js";

const RECOVERY_TARGET_S = 5;

export const drill2: Drill = {
  id: 2,
  name: "redis lost+back",
  async run({ scope, log, scale }) {
    const tally = new Tally();
    const probeTally = new Tally();
    const report = new Report([tally, probeTally]);
    const outageMs = Number(process.env.DRILL_REDIS_OUTAGE_S || 20) * 1000;
    const pgc = await startPostgres(scope);
    const redis = await startRedis(scope);
    const url = await pgc.createDatabase("drill2");
    const Q = 20;
    const ids = await load(url, {
      tenants: [
        richTenant("load"),
        richTenant("during", { rateLimit: { perMinute: Q, perDay: 1_000_000 } }),
        richTenant("after", { rateLimit: { perMinute: Q, perDay: 1_000_000 } }),
      ],
    });
    const services = await startServices(scope, ["d2-a", "d2-b"], { DATABASE_URL: url, REDIS_URL: redis.url });
    const clients = services.map((s) => new Client(s.url, tally));
    const probes = services.map((s) => new Client(s.url, probeTally));
    scope.defer("close clients", () => {
      for (const c of [...clients, ...probes]) c.close();
    });

    const key = ids.tenants.load!.apiKeys.full!.key;
    // The mirrors' third instance (killed as Redis goes), first in their turn.
    const doomed = await startService(scope, "d2-c", { DATABASE_URL: url, REDIS_URL: redis.url });
    const mirrorTally = new Tally();
    const mirrorClients = [doomed, ...services].map((s) => new Client(s.url, mirrorTally));
    scope.defer("close mirror clients", () => {
      for (const c of mirrorClients) c.close();
    });
    const polled = new FeedMirror(mirrorClients, key, ["lead"], 5);
    const streamed = new StreamMirror(
      [doomed, ...services].map((s) => s.url),
      key,
      ["lead"],
    );
    polled.follow(0);
    streamed.start();
    scope.defer("stop mirrors", async () => {
      await polled.stop();
      await streamed.stop();
    });
    const load1 = new SteadyLoad(
      clients,
      4,
      (n) =>
        n % 5 === 4
          ? {
              kind: "write",
              method: "POST",
              path: "/public/v1/leads",
              opts: { key, body: { customerName: `Load ${n}`, customerPhone: "+34600111222" } },
            }
          : n % 2
            ? { kind: "read", method: "GET", path: "/public/v1/leads", opts: { key, query: { limit: 10 } } }
            : { kind: "me", method: "GET", path: "/public/v1/me", opts: { key } },
      { pauseMs: 5 },
    );
    const ready = new Poller(probes, "/readyz", 200);
    scope.defer("stop load", async () => {
      await load1.stop();
      await ready.stop();
    });

    await sleep(4000 * scale);
    const down = Date.now();
    await redis.stop();
    await doomed.stop("SIGKILL");
    log(`redis stopped, ${doomed.name} killed; outage ${outageMs / 1000} s`);
    await sleep(1500);
    // The documented fallback: each instance counts the key in its own memory.
    const duringKey = ids.tenants.during!.apiKeys.full!.key;
    const perInstance: number[] = [];
    for (const c of clients) {
      const rs = await pool(Q + 10, 3, () => c.request("GET", "/public/v1/me", { key: duringKey }));
      perInstance.push(rs.filter((r) => r.status === 200).length);
    }
    report.figure(`outage quota ${perInstance.join("+")} (ceiling ${Q} per instance)`);
    report.check(
      perInstance.every((n) => n === Q),
      `during the outage a ${Q}/min key was admitted ${perInstance.join(" and ")} times (documented: ${Q} per instance)`,
    );
    await sleep(Math.max(0, down + outageMs - Date.now()));
    await redis.start();
    const up = Date.now();
    log("redis started again");

    // Recovery: every instance ready again (and staying ready).
    const deadline = up + 15_000;
    let recovered: number | null = null;
    while (Date.now() < deadline) {
      const last = services.map((_, i) => ready.samples.filter((s) => s.client === i && s.at > up).at(-1));
      if (last.every((s) => s?.status === 200)) {
        recovered =
          Math.max(
            ...services.map((_, i) => ready.samples.find((s) => s.client === i && s.at > up && s.status === 200)!.at),
          ) - up;
        break;
      }
      await sleep(100);
    }
    report.recoverySeconds = recovered === null ? null : recovered / 1000;
    report.check(
      recovered !== null && recovered <= RECOVERY_TARGET_S * 1000,
      `readiness not back within ${RECOVERY_TARGET_S} s of Redis returning (${recovered ?? "never"} ms)`,
    );
    // Shared again: exactly the ceiling across both instances.
    const afterKey = ids.tenants.after!.apiKeys.full!.key;
    const shared = await pool(Q + 10, 4, (i) =>
      clients[i % clients.length]!.request("GET", "/public/v1/me", { key: afterKey }),
    );
    const sharedOk = shared.filter((r) => r.status === 200).length;
    report.figure(`after quota ${sharedOk}/${Q} shared`);
    report.check(
      sharedOk === Q,
      `after recovery a ${Q}/min key was admitted ${sharedOk} times across the instances (want exactly ${Q})`,
    );
    await sleep(3000 * scale);
    await load1.stop();
    await ready.stop();

    // The mirrors: every acknowledged create in each, each equal to the rows.
    const acknowledged = load1.samples
      .filter((s) => s.kind === "write" && s.res.status === 201)
      .map((s) => keyOf("lead", s.res.body.id));
    await polled.stop();
    // To the head, without waiting (a poll on the killed instance fails and is made on the next one).
    for (let i = 0; i < 6 && !(await polled.drain(0)); i++);
    const caughtUp = Date.now() + 15_000;
    while (Date.now() < caughtUp && acknowledged.some((k) => !streamed.map.has(k))) await sleep(100);
    await streamed.stop();
    const db = new pg.Client({ connectionString: url });
    await db.connect();
    const tenantId = ids.tenants.load!.id;
    for (const [name, map] of [
      ["long-poll", polled.map],
      ["subscription", streamed.map],
    ] as const) {
      const missing = acknowledged.filter((k) => !map.has(k));
      report.check(
        missing.length === 0,
        `${name} mirror: ${missing.length} acknowledged creates missing (${missing[0]})`,
      );
      const diff = await rowsDiff(db, tenantId, map, ["lead"]);
      report.check(diff === null, `${name} mirror differs from the database: ${diff}`);
    }
    await db.end();
    const repeated = [...streamed.deliveries].filter(([, n]) => n > 1);
    report.check(
      repeated.length === 0,
      `subscription delivered ${repeated.length} leads more than once (${repeated[0]?.[0]})`,
    );
    report.check(streamed.reconnects >= 1, "the subscription never reconnected (its instance was killed)");
    for (const p of [...polled.problems, ...streamed.problems].slice(0, 10)) report.check(false, `mirror: ${p}`);
    report.check(mirrorTally.fiveXX === 0, `mirror requests answered ${mirrorTally.fiveXX} 5xx`);
    report.figure(
      `mirrors ${acknowledged.length} creates: ${polled.polls} long-polls, ${streamed.events} events, ${streamed.reconnects} reconnects`,
    );

    // Load during the whole drill: zero 5xx, zero network errors, no hanging request.
    const all = load1.samples;
    const during = load1.between(down, up);
    const slow = all.filter((s) => s.res.ms > 2000);
    const bad = all.filter((s) => s.res.status === 0 || s.res.status >= 500);
    report.check(
      bad.length === 0,
      `${bad.length} load requests failed (${[...new Set(bad.map((s) => s.res.status || s.res.error))].join(",")})`,
    );
    report.check(slow.length === 0, `${slow.length} load requests took over 2 s`);
    const unexpected = all.filter((s) => ![200, 201].includes(s.res.status));
    report.check(
      unexpected.length === 0,
      `${unexpected.length} load requests answered ${[...new Set(unexpected.map((s) => s.res.status))].join(",")}`,
    );
    report.figure(
      `load ${all.length} req (${during.length} in outage, p99 ${percentile(
        during.map((s) => s.res.ms),
        99,
      ).toFixed(0)} ms)`,
    );

    // /readyz while Redis was away: 503 with checks.redis unavailable, database ok.
    const outageProbes = ready.samples.filter((s) => s.at > down + 1000 && s.at < up);
    const notReported = outageProbes.filter(
      (s) => !(s.status === 503 && s.body?.checks?.redis === "unavailable" && s.body?.checks?.database === "ok"),
    );
    report.check(
      outageProbes.length > 0 && notReported.length === 0,
      `/readyz during the outage: ${notReported.length} of ${outageProbes.length} probes did not report 503 redis unavailable`,
    );
    const before = ready.samples.filter((s) => s.at < down);
    report.check(
      before.every((s) => s.status === 200),
      "/readyz not 200 before the outage",
    );
    report.figure(`readyz 503 ${outageProbes.length - notReported.length}/${outageProbes.length} in outage`);

    // The outage and the recovery are each logged once per instance.
    for (const s of services) {
      const lost = s.logs.filter((l) => l.includes("redis unavailable")).length;
      const back = s.logs.filter((l) => l.includes("redis back")).length;
      report.check(
        lost === 1 && back === 1,
        `${s.name} logged the outage ${lost}× and the recovery ${back}× (want 1 each)`,
      );
    }
    // The readiness probes are not counted against the load's 5xx: their 503 is the documented signal.
    return report.result({ allowed5xx: probeTally.fiveXX });
  },
};
