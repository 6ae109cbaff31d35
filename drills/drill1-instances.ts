// Drill 1 — three instances on one PostgreSQL + Redis (both the drill's own). Requests go
// round-robin over the instances:
//   • a key's minute quota admits exactly its ceiling across the three (±0);
//   • 50 concurrent duplicate creates with one Idempotency-Key execute once and all answer the same
//     body (a lead, and a web message);
//   • 50 concurrent bookings of one slot give exactly one 201 (the rest 409 APPOINTMENT_OVERLAP);
//   • a plan downgrade and a key revocation made with the admin CLI apply on the next request at
//     every instance (and the upgrade back as well).
import pg from "pg";
import { admin } from "./lib/admin.js";
import { richTenant, load } from "./lib/fixture.js";
import { Client, envelopeProblems, pool, Tally, type Res } from "./lib/http.js";
import { startPostgres } from "./lib/postgres.js";
import { startRedis } from "./lib/redis.js";
import { Report, type Drill } from "./lib/result.js";
import { startServices } from "./lib/service.js";

export const drill1: Drill = {
  id: 1,
  name: "three instances",
  async run({ scope, log }) {
    const tally = new Tally();
    const report = new Report([tally]);
    const pgc = await startPostgres(scope);
    const redis = await startRedis(scope);
    const url = await pgc.createDatabase("drill1");
    const QUOTA = 60;
    const ids = await load(url, {
      tenants: [
        richTenant("acme"),
        richTenant("quota", { rateLimit: { perMinute: QUOTA, perDay: 1_000_000 } }),
        richTenant("gate"),
      ],
    });
    const acme = ids.tenants.acme!;
    const gate = ids.tenants.gate!;
    const services = await startServices(scope, ["d1-a", "d1-b", "d1-c"], { DATABASE_URL: url, REDIS_URL: redis.url });
    const clients = services.map((s) => new Client(s.url, tally));
    scope.defer("close clients", () => {
      for (const c of clients) c.close();
    });
    const at = (i: number) => clients[i % clients.length]!;
    const db = new pg.Client({ connectionString: url });
    await db.connect();
    scope.defer("close db", () => db.end());

    // 1. Minute quota across the instances.
    const quotaKey = ids.tenants.quota!.apiKeys.full!.key;
    const total = QUOTA + 30;
    const quotaRes = await pool(total, 9, (i) => at(i).request("GET", "/public/v1/me", { key: quotaKey }));
    const admitted = quotaRes.filter((r) => r.status === 200).length;
    const limited = quotaRes.filter((r) => r.status === 429);
    report.figure(`quota ${admitted}/${total} admitted (ceiling ${QUOTA})`);
    report.check(admitted === QUOTA, `minute quota admitted ${admitted}, ceiling ${QUOTA}`);
    report.check(admitted + limited.length === total, `quota: unexpected statuses ${tally.describe()}`);
    for (const r of limited.slice(0, 3)) {
      const p = envelopeProblems(r, { status: 429, error: "RATE_LIMIT_EXCEEDED" });
      report.check(
        p.length === 0 && Number(r.headers["retry-after"]) >= 1,
        `429 envelope/Retry-After: ${p.join("; ")}`,
      );
    }
    report.check(
      quotaRes.every((r) => r.headers["x-ratelimit-limit"] === String(QUOTA)),
      "X-RateLimit-Limit differs from the ceiling",
    );
    log(`quota: ${admitted} admitted of ${total}`);

    // 2. Idempotent duplicates spread over the instances.
    const key = acme.apiKeys.full!.key;
    const leadBody = { customerName: "Dupe Drill", customerPhone: "+34611222333", notes: "drill 1" };
    const dupes = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        at(i).request("POST", "/public/v1/leads", {
          key,
          body: leadBody,
          headers: { "Idempotency-Key": "drill1-dupe" },
        }),
      ),
    );
    checkDuplicates(report, "lead", dupes);
    const leadRows = (await db.query(`SELECT count(*)::int AS n FROM "Lead" WHERE "customerName" = 'Dupe Drill'`))
      .rows[0].n;
    report.check(leadRows === 1, `duplicate lead creates wrote ${leadRows} rows`);
    const conv = acme.conversations.cw!;
    const msgDupes = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        at(i).request("POST", `/public/v1/conversations/${conv}/messages`, {
          key,
          body: { content: "once only" },
          headers: { "Idempotency-Key": "drill1-msg" },
        }),
      ),
    );
    checkDuplicates(report, "message", msgDupes);
    const msgRows = (await db.query(`SELECT count(*)::int AS n FROM "Message" WHERE "content" = 'once only'`)).rows[0]
      .n;
    report.check(msgRows === 1, `duplicate message sends wrote ${msgRows} rows`);
    log(`duplicates: ${leadRows} lead, ${msgRows} message`);

    // 3. One slot, 50 concurrent bookings.
    const day = Math.ceil(Date.now() / 86_400_000) * 86_400_000 + 2 * 86_400_000;
    const slot = {
      startsAt: new Date(day + 15 * 3_600_000).toISOString(),
      endsAt: new Date(day + 15.5 * 3_600_000).toISOString(),
    };
    const bookings = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        at(i).request("POST", "/public/v1/appointments", {
          key,
          body: { assignedUserId: acme.users.ana, title: `Booking ${i}`, appointmentType: "visit", ...slot },
        }),
      ),
    );
    const booked = bookings.filter((r) => r.status === 201).length;
    const overlaps = bookings.filter(
      (r) => r.status === 409 && envelopeProblems(r, { error: "APPOINTMENT_OVERLAP" }).length === 0,
    ).length;
    report.figure(`booking ${booked} success / ${overlaps} overlap`);
    report.check(booked === 1, `one slot: ${booked} bookings succeeded`);
    report.check(
      booked + overlaps === 50,
      `bookings: unexpected answers ${bookings
        .filter((r) => r.status !== 201 && r.status !== 409)
        .map((r) => r.status)
        .join(",")}`,
    );
    const apptRows = (
      await db.query(`SELECT count(*)::int AS n FROM "Appointment" WHERE "startsAt" = $1 AND "status" = 'scheduled'`, [
        slot.startsAt,
      ])
    ).rows[0].n;
    report.check(apptRows === 1, `one slot: ${apptRows} scheduled rows`);
    log(`booking: ${booked} success, ${overlaps} overlap`);

    // 4. Plan downgrade and key revocation with the admin CLI: next request at every instance.
    const gateKey = gate.apiKeys.full!.key;
    const everywhere = (k: string) => Promise.all(clients.map((c) => c.request("GET", "/public/v1/me", { key: k })));
    report.check(
      (await everywhere(gateKey)).every((r) => r.status === 200),
      "gate tenant not served before the downgrade",
    );
    await admin(url, "set-plan", gate.id, "starter");
    const down = await everywhere(gateKey);
    report.check(
      down.every((r) => envelopeProblems(r, { status: 403, error: "PLAN_NOT_ELIGIBLE" }).length === 0),
      `after set-plan starter: ${down.map((r) => r.status).join(",")} (want 403 PLAN_NOT_ELIGIBLE at every instance)`,
    );
    await admin(url, "set-plan", gate.id, "pro");
    const up = await everywhere(gateKey);
    report.check(
      up.every((r) => r.status === 200),
      `after set-plan pro: ${up.map((r) => r.status).join(",")}`,
    );
    await admin(url, "revoke-key", gate.apiKeys.full!.id);
    const revoked = await everywhere(gateKey);
    report.check(
      revoked.every((r) => envelopeProblems(r, { status: 401, error: "INVALID_CREDENTIALS" }).length === 0),
      `after revoke-key: ${revoked.map((r) => r.status).join(",")} (want 401 at every instance)`,
    );
    const other = await everywhere(gate.apiKeys.bobkey!.key);
    report.check(
      other.every((r) => r.status === 200),
      "revoking one key affected another key of the tenant",
    );
    report.figure(
      `downgrade/revoke seen by ${[down, revoked].every((l) => l.every((r) => r.status >= 400)) ? 3 : "<3"}/3 instances on the next request`,
    );
    return report.result();
  },
};

function checkDuplicates(report: Report, what: string, results: Res[]) {
  const created = results.filter((r) => r.status === 201);
  report.check(
    created.length === results.length,
    `${what} duplicates: statuses ${[...new Set(results.map((r) => r.status))].join(",")}`,
  );
  const bodies = new Set(created.map((r) => JSON.stringify(r.body)));
  report.check(bodies.size === 1, `${what} duplicates answered ${bodies.size} different bodies`);
  const replayed = results.filter((r) => r.headers["idempotent-replayed"] === "true").length;
  report.check(replayed === results.length - 1, `${what} duplicates: ${replayed} replays, want ${results.length - 1}`);
  report.figure(`${what} dupes 1 exec/${replayed} replays`);
}
