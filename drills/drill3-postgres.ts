// Drill 3 — PostgreSQL restart. Two instances on the drill's own cluster. Under steady read/write
// load the cluster is stopped with a fast shutdown, kept down DRILL_PG_OUTAGE_S (5 s) and started.
// Targets: every answer is a 2xx or the 503 SERVICE_UNAVAILABLE envelope, and no request takes
// longer than 5 s (no hang, no crash); within 5 s of PostgreSQL accepting connections again every
// instance serves again without a restart; every write acknowledged with a 2xx is there afterwards,
// no write is partial (idempotency claims finished, no pending message, tickets with their comment,
// conversations' last-message fields consistent), and retrying each failed write with its
// Idempotency-Key creates it exactly once.
// Two-way sync under the same restart: lanes of PUTs by external id and batch upserts (items with a
// valid or a stale `ifMatch`, external ids raced by every lane; drills/lib/sync-writers.ts) and a
// mirror of the tenant's leads, contacts and tickets following the changes feed (drills/lib/mirror.ts)
// run through the outage. Their answers too are a 2xx, the 412 a precondition called for, or the 503
// envelope, none slower than 5 s; afterwards no acknowledged write is lost (each external id's
// object holds its last acknowledged write, or an uncertain one sent later, at a consistent version),
// no external id is held by two objects, and the mirror equals the database (every object at its
// version), the lists, and the feed read from the beginning.
import pg from "pg";
import { richTenant, load } from "./lib/fixture.js";
import { Client, envelopeProblems, percentile, Tally, type Res } from "./lib/http.js";
import { Poller, SteadyLoad, type Step } from "./lib/load.js";
import { FeedMirror, listed, mapDiff, rowsDiff, type FeedType } from "./lib/mirror.js";
import { startPostgres } from "./lib/postgres.js";
import { Report, type Drill } from "./lib/result.js";
import { sleep } from "./lib/scope.js";
import { logsOf, startServices } from "./lib/service.js";
import { SyncWriters } from "./lib/sync-writers.js";

const RECOVERY_TARGET_S = 5;
const PROMPT_MS = 5000;
const SYNC_LANES = 3;
/** Valid and stale preconditions the sync writers send at least (before they stop). */
const SYNC_PRECONDITIONS = 30;
const MIRRORED: FeedType[] = ["lead", "contact", "ticket"];

interface Write {
  n: number;
  kind: "lead" | "ticket" | "message" | "contact";
  path: string;
  body: Record<string, unknown>;
  idem: string;
  acked?: Res;
}

export const drill3: Drill = {
  id: 3,
  name: "postgres restart",
  async run({ scope, log, scale }) {
    const tally = new Tally();
    const probeTally = new Tally();
    const readyTally = new Tally();
    const syncTally = new Tally();
    const mirrorTally = new Tally();
    const report = new Report([tally, probeTally, readyTally, syncTally, mirrorTally]);
    const outageMs = Number(process.env.DRILL_PG_OUTAGE_S || 5) * 1000;
    const pgc = await startPostgres(scope);
    const url = await pgc.createDatabase("drill3");
    const ids = await load(url, { tenants: [richTenant("w")] });
    const w = ids.tenants.w!;
    const key = w.apiKeys.full!.key;
    const services = await startServices(scope, ["d3-a", "d3-b"], { DATABASE_URL: url });
    const clients = services.map((s) => new Client(s.url, tally));
    const probes = services.map((s) => new Client(s.url, probeTally));
    const syncClients = services.map((s) => new Client(s.url, syncTally));
    const mirrorClients = services.map((s) => new Client(s.url, mirrorTally));
    const all = [...clients, ...probes, ...syncClients, ...mirrorClients];
    scope.defer("close clients", () => {
      for (const c of all) c.close();
    });

    const writes: Write[] = [];
    const conv = w.conversations.cw!;
    const step = (n: number): Step => {
      const kind = (["lead", "ticket", "message", "contact", "read", "read"] as const)[((n % 6) + 6) % 6]!;
      const tag = n < 0 ? "Warm" : "PG";
      const phone = n < 0 ? `+3467${String(-n).padStart(7, "0")}` : `+3466${String(n).padStart(7, "0")}`;
      if (kind === "read")
        return {
          kind,
          method: "GET",
          path: n % 4 ? "/public/v1/leads" : "/public/v1/me",
          opts: { key, query: n % 4 ? { limit: 5 } : undefined },
        };
      const wr: Write =
        kind === "lead"
          ? {
              n,
              kind,
              path: "/public/v1/leads",
              body: { customerName: `${tag} lead ${n}`, customerPhone: "+34600999000", notes: `n=${n}` },
              idem: `${tag}-${n}`,
            }
          : kind === "ticket"
            ? {
                n,
                kind,
                path: "/public/v1/tickets",
                body: { subject: `${tag} ticket ${n}`, comment: `${tag} comment ${n}`, leadId: w.leads.l1 },
                idem: `${tag}-${n}`,
              }
            : kind === "message"
              ? {
                  n,
                  kind,
                  path: `/public/v1/conversations/${conv}/messages`,
                  body: { content: `${tag} message ${n}` },
                  idem: `${tag}-${n}`,
                }
              : {
                  n,
                  kind,
                  path: "/public/v1/contacts",
                  body: { fullName: `${tag} contact ${n}`, phone },
                  idem: `${tag}-${n}`,
                };
      writes.push(wr);
      return {
        kind,
        method: "POST",
        path: wr.path,
        opts: { key, body: wr.body, headers: { "Idempotency-Key": wr.idem }, timeoutMs: 30_000 },
        after: (res) => {
          if (res.status === 201) wr.acked = res;
        },
      };
    };
    // Warm-up (not counted): the first use of each query shape compiles it (≈0.2–1.5 s per instance).
    const warmTally = new Tally();
    for (const s of services) {
      const c = new Client(s.url, warmTally);
      for (let i = 0; i < 6; i++) {
        const st = step(-1 - i);
        await c.request(st.method, st.path, st.opts);
      }
      c.close();
    }
    writes.length = 0;
    const steady = new SteadyLoad(clients, 6, step, { pauseMs: 2, maxRequests: Math.round(60_000 * scale) });
    const ready = new Poller(
      services.map((s) => new Client(s.url, readyTally)),
      "/readyz",
      250,
    );
    const sync = new SyncWriters(syncClients, key, w, SYNC_LANES, 20);
    const mirror = new FeedMirror(mirrorClients, key, MIRRORED);
    mirror.follow(200);
    scope.defer("stop load", async () => {
      await steady.stop();
      await ready.stop();
      await sync.stop();
      await mirror.stop();
    });

    await sleep(4000 * scale);
    const stopAt = Date.now();
    await pgc.stopFast();
    const down = Date.now();
    log(`postgres stopped (fast) in ${down - stopAt} ms; down for ${outageMs / 1000} s`);
    await sleep(outageMs);
    await pgc.start();
    const up = Date.now();
    log(`postgres started again (${up - down} ms after stop)`);

    // Recovery: each instance answers GET /leads with 200 again.
    const firstOk: (number | null)[] = services.map(() => null);
    while (Date.now() < up + 20_000 && firstOk.some((t) => t === null)) {
      await Promise.all(
        probes.map(async (c, i) => {
          if (firstOk[i] !== null) return;
          const r = await c.request("GET", "/public/v1/leads", { key, query: { limit: 1 }, timeoutMs: 10_000 });
          if (r.status === 200) firstOk[i] = Date.now();
        }),
      );
      await sleep(100);
    }
    const recovered = firstOk.every((t) => t !== null) ? Math.max(...(firstOk as number[])) - up : null;
    report.recoverySeconds = recovered === null ? null : recovered / 1000;
    report.check(
      recovered !== null && recovered <= RECOVERY_TARGET_S * 1000,
      `instances not serving within ${RECOVERY_TARGET_S} s of PostgreSQL returning (${recovered ?? "never"} ms)`,
    );
    await sleep(4000 * scale);
    await steady.stop();
    await ready.stop();
    // The sync writers go on until each of their external ids has a definite answer again.
    const syncFrom = Date.now();
    while (!sync.settled(SYNC_PRECONDITIONS) && Date.now() < syncFrom + 30_000) await sleep(100);
    const settled = sync.settled(SYNC_PRECONDITIONS);
    report.check(settled, `the sync writers did not settle within 30 s (${sync.unsettled()} external ids uncertain)`);
    await sync.stop();
    // /readyz: 503 (database unavailable) while PostgreSQL is down, 200 again afterwards.
    const downProbes = ready.samples.filter((p) => p.at > down + 500 && p.at < up - 500);
    const notDown = downProbes.filter((p) => !(p.status === 503 && p.body?.checks?.database === "unavailable"));
    report.check(
      downProbes.length > 0 && notDown.length === 0,
      `/readyz while PostgreSQL was down: ${notDown.length} of ${downProbes.length} probes not 503`,
    );
    const lateProbes = ready.samples.filter((p) => p.at > up + RECOVERY_TARGET_S * 1000);
    report.check(
      lateProbes.every((p) => p.status === 200),
      "/readyz not 200 after the recovery",
    );
    report.figure(`readyz 503 ${downProbes.length - notDown.length}/${downProbes.length} while down`);

    // Every answer: 2xx or the exact 503 envelope, promptly; nothing but 2xx well after recovery.
    const samples = steady.samples;
    const unavailable = samples.filter((s) => s.res.status === 503);
    const wrong = samples.filter(
      (s) =>
        !(
          s.res.status === 200 ||
          s.res.status === 201 ||
          (s.res.status === 503 && envelopeProblems(s.res, { error: "SERVICE_UNAVAILABLE" }).length === 0)
        ),
    );
    report.check(
      wrong.length === 0,
      `${wrong.length} answers neither 2xx nor the 503 envelope: ${describe(wrong.map((s) => s.res))}`,
    );
    const slow = samples.filter((s) => s.res.ms > PROMPT_MS);
    report.check(
      slow.length === 0,
      `${slow.length} requests took over ${PROMPT_MS} ms (max ${Math.max(...samples.map((s) => s.res.ms)).toFixed(0)} ms)`,
    );
    const late = unavailable.filter((s) => s.res.startedAt > up + RECOVERY_TARGET_S * 1000);
    report.check(
      late.length === 0,
      `${late.length} requests got 503 more than ${RECOVERY_TARGET_S} s after PostgreSQL returned`,
    );
    const pre = samples.filter((s) => s.res.startedAt < stopAt - 1000);
    report.figure(
      `before: ${pre.length} req p99 ${percentile(
        pre.map((s) => s.res.ms),
        99,
      ).toFixed(0)} ms max ${Math.max(0, ...pre.map((s) => s.res.ms)).toFixed(0)} ms`,
    );
    const outage = samples.filter((s) => s.res.startedAt >= stopAt && s.res.startedAt < up);
    report.figure(
      `load ${samples.length} req, ${unavailable.length}×503 (${outage.length} sent in outage, max ${Math.max(0, ...outage.map((s) => s.res.ms)).toFixed(0)} ms, p99 ${percentile(
        outage.map((s) => s.res.ms),
        99,
      ).toFixed(0)} ms)`,
    );

    // Read everything back.
    const db = new pg.Client({ connectionString: url });
    await db.connect();
    scope.defer("close db", () => db.end());
    const acked = writes.filter((x) => x.acked);
    const missing: string[] = [];
    for (const x of acked) {
      const id = x.acked!.body?.id;
      const table = { lead: "Lead", ticket: "Ticket", message: "Message", contact: "Contact" }[x.kind];
      const found = (await db.query(`SELECT 1 FROM "${table}" WHERE "id" = $1`, [id])).rowCount;
      if (!found) missing.push(`${x.kind} ${x.n}`);
    }
    report.check(
      missing.length === 0,
      `${missing.length} acknowledged writes missing: ${missing.slice(0, 5).join(", ")}`,
    );
    report.figure(`${acked.length}/${writes.length} writes acked, ${missing.length} missing`);

    // Retry every write that was not acknowledged, with its Idempotency-Key: created exactly once. A
    // send cut between its commit and its outcome is finished by the retry (after the documented
    // PROVIDER_TIMEOUT_MS + 10 s), which marks its message failed.
    const retried = writes.filter((x) => !x.acked);
    for (const x of retried) {
      const r = await clients[x.n % clients.length]!.request("POST", x.path, {
        key,
        body: x.body,
        headers: { "Idempotency-Key": x.idem },
      });
      if (r.status === 201) x.acked = r;
      else report.fail(`retry of ${x.kind} ${x.n} answered ${r.status} ${r.body?.error ?? r.error ?? ""}`);
    }
    // Partial writes, once retried (an unfinished send's message is "pending" until its retry or the
    // service's sweep — PROVIDER_TIMEOUT_MS + 10 s, swept every 15 s — settles it: wait for that).
    const settleFrom = Date.now();
    const pendingAt = async () =>
      (await db.query(`SELECT count(*)::int AS n FROM "Message" WHERE "deliveryStatus" = 'pending'`)).rows[0]
        .n as number;
    const pendingAfterRetries = await pendingAt();
    while ((await pendingAt()) > 0 && Date.now() < settleFrom + 35_000) await sleep(500);
    if (pendingAfterRetries)
      report.figure(
        `${pendingAfterRetries} pending message(s) settled by the sweep in ${((Date.now() - settleFrom) / 1000).toFixed(1)} s`,
      );
    const partial: string[] = [];
    const open = (await db.query(`SELECT count(*)::int AS n FROM "IdempotencyRecord" WHERE "statusCode" <> 201`))
      .rows[0].n;
    if (open) partial.push(`${open} idempotency claims without a response`);
    const pending = (await db.query(`SELECT count(*)::int AS n FROM "Message" WHERE "deliveryStatus" = 'pending'`))
      .rows[0].n;
    if (pending) partial.push(`${pending} messages left pending`);
    const ticketsWithout = (
      await db.query(`SELECT count(*)::int AS n FROM "Ticket" t WHERE t."subject" LIKE 'PG ticket %'
        AND (SELECT count(*) FROM "TicketComment" c WHERE c."ticketId" = t."id" AND c."body" = 'PG comment ' || substr(t."subject", 11)) <> 1`)
    ).rows[0].n;
    if (ticketsWithout) partial.push(`${ticketsWithout} tickets without exactly their comment`);
    const stale = (
      await db.query(`SELECT count(*)::int AS n FROM "Conversation" c
        WHERE c."lastMessageAt" IS DISTINCT FROM (SELECT max(m."createdAt") FROM "Message" m WHERE m."conversationId" = c."id")`)
    ).rows[0].n;
    if (stale) partial.push(`${stale} conversations whose lastMessageAt is not their newest message`);
    const orphans = (
      await db.query(`SELECT count(*)::int AS n FROM "IdempotencyRecord" r WHERE "statusCode" = 201 AND NOT EXISTS (
        SELECT 1 FROM "Lead" WHERE "id"::text = r."responseBody"->>'id' UNION ALL SELECT 1 FROM "Ticket" WHERE "id"::text = r."responseBody"->>'id'
        UNION ALL SELECT 1 FROM "Message" WHERE "id"::text = r."responseBody"->>'id' UNION ALL SELECT 1 FROM "Contact" WHERE "id"::text = r."responseBody"->>'id')`)
    ).rows[0].n;
    if (orphans) partial.push(`${orphans} idempotency records replaying a row that does not exist`);
    report.check(partial.length === 0, `partial writes: ${partial.join("; ")}`);

    const dupes: string[] = [];
    for (const [kind, sql] of [
      [
        "lead",
        `SELECT "notes" AS k, count(*)::int AS n FROM "Lead" WHERE "customerName" LIKE 'PG lead %' GROUP BY 1 HAVING count(*) > 1`,
      ],
      [
        "ticket",
        `SELECT "subject" AS k, count(*)::int AS n FROM "Ticket" WHERE "subject" LIKE 'PG ticket %' GROUP BY 1 HAVING count(*) > 1`,
      ],
      [
        "message",
        `SELECT "content" AS k, count(*)::int AS n FROM "Message" WHERE "content" LIKE 'PG message %' GROUP BY 1 HAVING count(*) > 1`,
      ],
    ] as const)
      for (const r of (await db.query(sql)).rows) dupes.push(`${kind} ${r.k} ×${r.n}`);
    const counts = (
      await db.query(`SELECT
        (SELECT count(*) FROM "Lead" WHERE "customerName" LIKE 'PG lead %')::int AS lead,
        (SELECT count(*) FROM "Ticket" WHERE "subject" LIKE 'PG ticket %')::int AS ticket,
        (SELECT count(*) FROM "Message" WHERE "content" LIKE 'PG message %')::int AS message,
        (SELECT count(*) FROM "Contact" WHERE "fullName" LIKE 'PG contact %')::int AS contact`)
    ).rows[0];
    for (const kind of ["lead", "ticket", "message", "contact"] as const) {
      const want = writes.filter((x) => x.kind === kind).length;
      if (counts[kind] !== want) dupes.push(`${kind}: ${counts[kind]} rows for ${want} distinct writes`);
    }
    report.check(dupes.length === 0, `after retries: ${dupes.slice(0, 5).join(", ")}`);
    report.figure(`${retried.length} retried, ${dupes.length} dup/lost`);

    // Every write has been answered: the sync ledger against the database, and the mirror (caught up
    // once more) against the database, the lists and the feed read from the beginning.
    await mirror.stop();
    let caughtUp = false;
    for (let i = 0; i < 5 && !caughtUp; i++) caughtUp = await mirror.drain();
    // Their answers: the load's targets (the lanes judge each status).
    const syncAnswers = [...sync.samples, ...mirror.answers.map((res) => ({ kind: "changes", res }))];
    for (const p of sync.problems.slice(0, 5)) report.fail(`sync: ${p}`);
    if (sync.problems.length > 5) report.fail(`sync: … ${sync.problems.length - 5} more`);
    const syncSlow = syncAnswers.filter((x) => x.res.ms > PROMPT_MS);
    const slowOnes = describe(syncSlow.map((x) => x.res));
    report.check(syncSlow.length === 0, `${syncSlow.length} sync requests took over ${PROMPT_MS} ms: ${slowOnes}`);
    const syncLate = syncAnswers.filter((x) => x.res.status === 503 && x.res.startedAt > up + RECOVERY_TARGET_S * 1000);
    const lateWhy = `${syncLate.length} sync requests got 503 more than ${RECOVERY_TARGET_S} s after the restart`;
    report.check(syncLate.length === 0, lateWhy);
    const syncLost = syncAnswers.filter((x) => x.res.status === 0);
    const lostOnes = syncLost.slice(0, 3).map((x) => `${x.kind} ${x.res.error}`);
    report.check(syncLost.length === 0, `${syncLost.length} sync requests without an answer: ${lostOnes.join(", ")}`);
    const syncUnavailable = syncAnswers.filter((x) => x.res.status === 503).length;
    const ledger = await sync.verify(db, w.id);
    for (const p of ledger.problems.slice(0, 5)) report.fail(`sync: ${p}`);
    if (ledger.problems.length > 5) report.fail(`sync: … ${ledger.problems.length - 5} more`);
    report.figure(ledger.figure);
    for (const p of mirror.problems.slice(0, 5)) report.fail(`mirror: ${p}`);
    if (report.check(caughtUp, "the mirror could not catch up after the drill")) {
      const rows = await rowsDiff(db, w.id, mirror.map, MIRRORED);
      report.check(rows === null, `mirror vs database: ${rows}`);
      const fresh = await listed(clients[0]!, key, MIRRORED);
      const lists = typeof fresh === "string" ? fresh : mapDiff(mirror.map, fresh);
      report.check(lists === null, `mirror vs lists: ${lists}`);
      const again = new FeedMirror(clients, key, MIRRORED);
      const read = await again.drain();
      const feed = read ? mapDiff(mirror.map, again.map) : (again.problems[0] ?? "not read");
      report.check(feed === null, `mirror vs the feed from the beginning: ${feed}`);
    }
    report.figure(`mirror: ${mirror.map.size} objects, ${mirror.items} items in ${mirror.polls} polls`);
    for (const s of samples.filter((x) => x.res.status >= 500 && x.res.status !== 503).slice(0, 3))
      report.fail(
        `server log of a ${s.res.status}: ${logsOf(services, s.res.body?.request_id).join(" | ").slice(0, 1500)}`,
      );
    for (const s of samples.filter((x) => x.res.status === 0).slice(0, 3))
      report.fail(
        `network error: ${s.kind} ${s.res.error} after ${s.res.ms.toFixed(0)} ms, sent ${s.res.startedAt - stopAt} ms after the stop began (reused socket: ${s.res.reusedSocket})`,
      );
    for (const s of services)
      report.check(s.child.exitCode === null && s.child.signalCode === null, `${s.name} exited during the drill`);
    for (const s of slow.slice(0, 3))
      report.fail(
        `slow: ${s.kind} ${s.res.status} ${s.res.body?.error ?? s.res.error ?? ""} ${s.res.ms.toFixed(0)} ms, sent ${s.res.startedAt - stopAt} ms after the stop began (up at ${up - stopAt})`,
      );
    const allowed5xx = unavailable.length + probeTally.fiveXX + readyTally.fiveXX + syncUnavailable;
    return report.result({ allowed5xx });
  },
};

function describe(rs: Res[]): string {
  const m = new Map<string, number>();
  for (const r of rs) {
    const k = r.status ? `${r.status} ${r.body?.error ?? r.text.slice(0, 40)}` : `net ${r.error}`;
    m.set(k, (m.get(k) ?? 0) + 1);
  }
  return [...m].map(([k, n]) => `${k} ×${n}`).join(", ");
}
