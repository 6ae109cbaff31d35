// The round trips of a create. A successful POST /leads and a successful POST
// /appointments are each ONE round trip besides the guard's key lookup — one "tenant_exec" call
// (server/db/delegate.ts): the lookups the row needs + the Idempotency-Key claim + the row + the
// stored response; for an appointment also the calendar lock and the checks — with no
// BEGIN/COMMIT. Everything else — replays, mismatches, 404s, 409s — goes through the transactional
// path and must behave exactly as before (the resource files test each behaviour; here: that they
// still hold after a one-statement write, and that nothing is persisted by a refused one).
// @topology pooler
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TenantIds } from "../../server/admin/fixture.js";
import { expectEnvelope, freshDatabase, randomUuid, startApp, type TestApp, type TestDb } from "../helpers/app.js";
import { fixture, tenant } from "../helpers/fixtures.js";
import { isKeyLookup } from "../../server/auth/authenticate.js";

const statements: string[] = [];
let recording = false;
let app: TestApp;
let acme: TenantIds;
let key: string;

let db: TestDb | undefined;
beforeAll(async () => {
  // One entry per round trip: a "tenant_exec" call (the one-statement create) as its first statement.
  db = await freshDatabase({
    observe: (sql, _params, part) => recording && (part?.index ?? 0) === 0 && statements.push(sql),
  });
  // Its statements are watched on app.db: every request on the coordinator's pool, also with DATABASE_ROUTING=workers.
  app = await startApp({ db, config: { databaseRouting: "coordinator" } });
  const ids = await app.load(
    fixture(
      tenant("acme", {
        rateLimit: { perMinute: 100_000, perDay: 1_000_000 },
        contacts: [{ ref: "bea", fullName: "Bea Soto", phone: "+34600000001", email: "bea@acme.test" }],
        conversations: [
          {
            ref: "c1",
            channel: "wa",
            identity: { externalId: "34600000001", name: "Bea", phone: "+34600000001", contact: "bea" },
          },
        ],
      } as any),
    ),
  );
  acme = ids.tenants.acme!;
  key = acme.apiKeys.full!.key;
});
// The database is this file's own (passed to startApp, which then leaves it alone): dropped here.
afterAll(async () => {
  await app?.close();
  await db?.drop();
});

/** The statements the service sent to the database while answering one request. */
async function traced(method: string, path: string, body: unknown, headers: Record<string, string> = {}) {
  statements.length = 0;
  recording = true;
  try {
    const res = await app.request(method, path, { key, body, headers });
    return { res, sql: [...statements] };
  } finally {
    recording = false;
  }
}
/** Statements of the request other than the guard's key lookup (one per request, tested in auth). */
const work = (sql: string[]) => sql.filter((s) => !isKeyLookup(s));
const isTransactionControl = (s: string) => /^\s*(BEGIN|COMMIT|ROLLBACK|START TRANSACTION)/i.test(s);

let slot = 0;
const appointment = () => {
  const start = new Date(Date.UTC(2031, 0, 6, 9) + slot++ * 3_600_000);
  return {
    assignedUserId: acme.users.ana!,
    title: "Viewing",
    appointmentType: "visit",
    startsAt: start.toISOString(),
    endsAt: new Date(start.getTime() + 1_800_000).toISOString(),
  };
};

describe("POST /leads", () => {
  it("succeeds in ONE statement (lookups + claim + row + stored response), with or without a key", async () => {
    for (const headers of [{ "Idempotency-Key": `lead-${randomUuid()}` }, {}] as Record<string, string>[]) {
      const { res, sql } = await traced(
        "POST",
        "/public/v1/leads",
        { customerName: "Rt", customerPhone: "600 000 001" },
        headers,
      );
      expect(res.status).toBe(201);
      expect(res.body.customerId).toBe(acme.contacts.bea);
      expect(res.body.stageId).toBe(acme.stages.new);
      expect(work(sql)).toHaveLength(1);
      expect(sql.some(isTransactionControl)).toBe(false);
    }
  });
  it("what the statement resolves (rule 2's contact, the given stage, no match) is in the body, the row and the stored response", async () => {
    const cases = [
      {
        body: { customerName: "Via chat", conversationId: acme.conversations.c1, stageId: acme.stages.won },
        customerId: acme.contacts.bea,
        stageId: acme.stages.won,
      },
      {
        body: { customerName: "No match", customerEmail: "nobody@nowhere.test" },
        customerId: null,
        stageId: acme.stages.new,
      },
      {
        body: { customerName: "By mail", customerEmail: "BEA@acme.test" },
        customerId: acme.contacts.bea,
        stageId: acme.stages.new,
      },
    ];
    expect(acme.conversations.c1).toBeTruthy();
    for (const c of cases) {
      const headers = { "Idempotency-Key": `lead-${randomUuid()}` };
      const { res, sql } = await traced("POST", "/public/v1/leads", c.body, headers);
      expect(res.status).toBe(201);
      expect(work(sql)).toHaveLength(1);
      expect({ name: c.body.customerName, customerId: res.body.customerId, stageId: res.body.stageId }).toEqual({
        name: c.body.customerName,
        customerId: c.customerId,
        stageId: c.stageId,
      });
      const row = await app.db.prisma.lead.findFirst({ where: { tenantId: acme.id, id: res.body.id } });
      expect({ customerId: row?.customerId, stageId: row?.stageId }).toEqual({
        customerId: c.customerId,
        stageId: c.stageId,
      });
      const stored = await app.db.prisma.idempotencyRecord.findFirst({
        where: { tenantId: acme.id, key: headers["Idempotency-Key"] },
      });
      expect(stored?.responseBody).toMatchObject({ id: res.body.id, customerId: c.customerId, stageId: c.stageId });
      const replay = await app.request("POST", "/public/v1/leads", { key, body: c.body, headers });
      expect(replay.headers.get("idempotent-replayed")).toBe("true");
      expect(replay.text).toBe(res.text);
    }
  });
  it("the stored response is the body: a replay returns it byte for byte, with the replay header", async () => {
    const headers = { "Idempotency-Key": `lead-${randomUuid()}` };
    const body = {
      customerName: "Replay",
      customerEmail: "BEA@acme.test",
      budget: { min: 1, max: 2 },
      zones: ["a", "b"],
      rooms: 3,
      notes: "n",
    };
    const first = await app.request("POST", "/public/v1/leads", { key, body, headers });
    expect(first.status).toBe(201);
    expect(first.body.customerId).toBe(acme.contacts.bea);
    const again = await app.request("POST", "/public/v1/leads", { key, body, headers });
    expect(again.status).toBe(201);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.text).toBe(first.text);
    const get = await app.request("GET", `/public/v1/leads/${first.body.id}`, { key });
    expect(get.text).toBe(first.text);
    const mismatch = await app.request("POST", "/public/v1/leads", { key, body: { ...body, rooms: 4 }, headers });
    expectEnvelope(mismatch, 422, "IDEMPOTENCY_KEY_REUSE_MISMATCH");
    expect(await app.db.prisma.lead.count({ where: { tenantId: acme.id, customerName: "Replay" } })).toBe(1);
  });
  it("concurrent duplicates: one writes, the others replay its body", async () => {
    const headers = { "Idempotency-Key": `lead-${randomUuid()}` };
    const body = { customerName: "Concurrent" };
    const all = await Promise.all(
      Array.from({ length: 6 }, () => app.request("POST", "/public/v1/leads", { key, body, headers })),
    );
    expect(all.map((r) => r.status)).toEqual(Array(6).fill(201));
    expect(new Set(all.map((r) => r.text)).size).toBe(1);
    expect(all.filter((r) => r.headers.get("idempotent-replayed") === "true")).toHaveLength(5);
    expect(await app.db.prisma.lead.count({ where: { tenantId: acme.id, customerName: "Concurrent" } })).toBe(1);
  });
  it("an expired key is taken over: the new body is written and answered, then replayed", async () => {
    const k = `lead-${randomUuid()}`;
    const headers = { "Idempotency-Key": k };
    const first = await app.request("POST", "/public/v1/leads", { key, body: { customerName: "Old" }, headers });
    expect(first.status).toBe(201);
    await app.db.prisma.$executeRaw`UPDATE "IdempotencyRecord" SET "expiresAt" = now() - interval '1 second'
                   WHERE "tenantId" = ${acme.id}::uuid AND "key" = ${k}`;
    const taken = await app.request("POST", "/public/v1/leads", { key, body: { customerName: "New" }, headers });
    expect(taken.status).toBe(201);
    expect(taken.headers.get("idempotent-replayed")).toBeNull();
    expect(taken.body.customerName).toBe("New");
    expect(taken.body.id).not.toBe(first.body.id);
    const replay = await app.request("POST", "/public/v1/leads", { key, body: { customerName: "New" }, headers });
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.text).toBe(taken.text);
  });
  it("a 404 with a key persists nothing (neither the lead nor the key), and the key stays usable", async () => {
    const headers = { "Idempotency-Key": `lead-${randomUuid()}` };
    const missing = await app.request("POST", "/public/v1/leads", {
      key,
      body: { customerName: "Nope", stageId: randomUuid() },
      headers,
    });
    expectEnvelope(missing, 404, "NOT_FOUND");
    expect(
      await app.db.prisma.idempotencyRecord.count({ where: { tenantId: acme.id, key: headers["Idempotency-Key"] } }),
    ).toBe(0);
    const ok = await app.request("POST", "/public/v1/leads", {
      key,
      body: { customerName: "Nope", stageId: acme.stages.won },
      headers,
    });
    expect(ok.status).toBe(201);
    expect(ok.body.stageId).toBe(acme.stages.won);
  });
});

describe("POST /appointments", () => {
  it("succeeds in one statement (calendar lock + checks + claim + row), with or without a key", async () => {
    for (const headers of [{ "Idempotency-Key": `appt-${randomUuid()}` }, {}] as Record<string, string>[]) {
      const { res, sql } = await traced("POST", "/public/v1/appointments", appointment(), headers);
      expect(res.status).toBe(201);
      expect(work(sql)).toHaveLength(1);
      expect(work(sql)[0]).toMatch(/pg_advisory_xact_lock/);
    }
  });
  it("an overlap is the 409 naming the blocker, nothing persisted; a replay of the first still replays", async () => {
    const headers = { "Idempotency-Key": `appt-${randomUuid()}` };
    const body = appointment();
    const first = await app.request("POST", "/public/v1/appointments", { key, body, headers });
    expect(first.status).toBe(201);
    const again = await app.request("POST", "/public/v1/appointments", { key, body, headers });
    expect(again.status).toBe(201);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.text).toBe(first.text);
    const before = await app.db.prisma.appointment.count();
    const clash = await app.request("POST", "/public/v1/appointments", {
      key,
      body,
      headers: { "Idempotency-Key": `appt-${randomUuid()}` },
    });
    expectEnvelope(clash, 409, "APPOINTMENT_OVERLAP");
    expect(clash.body.details.conflictingAppointmentId).toBe(first.body.id);
    expect(await app.db.prisma.appointment.count()).toBe(before);
  });
  it("a user that is not bookable is a 404 through the transactional path, nothing persisted", async () => {
    const before = await app.db.prisma.appointment.count();
    const res = await app.request("POST", "/public/v1/appointments", {
      key,
      body: { ...appointment(), assignedUserId: acme.users.bob! },
    });
    expectEnvelope(res, 404, "NOT_FOUND");
    expect(await app.db.prisma.appointment.count()).toBe(before);
  });
  it("concurrent overlapping creates of one user: exactly one is written, the others are 409", async () => {
    const body = appointment();
    const all = await Promise.all(
      Array.from({ length: 6 }, () => app.request("POST", "/public/v1/appointments", { key, body })),
    );
    expect(all.map((r) => r.status).sort()).toEqual([201, 409, 409, 409, 409, 409]);
    expect(
      await app.db.prisma.appointment.count({ where: { tenantId: acme.id, startsAt: new Date(body.startsAt) } }),
    ).toBe(1);
  });
});
