// Appointments over HTTP: create, partial update (status, reschedule, notes), list; the overlap rule
// (database exclusion constraint), tenant isolation, scopes, idempotency. Runs on PGlite and, with
// DATABASE_URL, on PostgreSQL (where the concurrency tests are real races).
// @topology pooler citus
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TenantIds } from "../../server/admin/fixture.js";
import { AppError } from "../../server/errors.js";
import { guardAppointmentWrite } from "../../routers/appointments/schemas.js";
import { expectEnvelope, holdCalendarLock, randomUuid, startApp } from "../helpers/app.js";
import { fixture, tenant } from "../helpers/fixtures.js";
import { waitForLockWaiters } from "../helpers/locks.js";

const APPT = "/public/v1/appointments";
const onPostgres = Boolean(process.env.DATABASE_URL);
const KEYS = [
  "appointmentType",
  "assignedUserId",
  "conversationId",
  "createdAt",
  "customerId",
  "endsAt",
  "id",
  "leadId",
  "notes",
  "source",
  "startsAt",
  "status",
  "title",
  "updatedAt",
  "version",
];

let app: Awaited<ReturnType<typeof startApp>>;
let acme: TenantIds;
let other: TenantIds;
let key: string;
let otherKey: string;

function withData(ref: string) {
  return tenant(ref, {
    // Many requests per test file: lift the per-minute quota (quotas have their own tests).
    rateLimit: { perMinute: 100_000, perDay: 1_000_000 },
    users: [
      {
        ref: "ana",
        name: "Ana Ruiz",
        email: `ana@${ref}.test`,
        bookable: true,
        assignable: true,
        workingHours: [1, 2, 3, 4, 5].map((weekday) => ({ weekday, start: "09:00", end: "17:00" })),
      },
      { ref: "bob", name: "Bob Lee", email: `bob@${ref}.test`, bookable: false, assignable: false },
      { ref: "cai", name: "Cai Wu", email: `cai@${ref}.test`, bookable: true },
      { ref: "dan", name: "Dan Roe", email: `dan@${ref}.test`, bookable: true },
      { ref: "eve", name: "Eve Poe", email: `eve@${ref}.test`, bookable: true },
    ],
    apiKeys: [
      { ref: "full", owner: "ana", scopes: "all" },
      { ref: "none", owner: "ana", scopes: [] },
      { ref: "read", owner: "ana", scopes: ["tenant:appointments.read"] },
      { ref: "manage", owner: "ana", scopes: ["tenant:appointments.manage"] },
      { ref: "tix", owner: "ana", scopes: ["tenant:tickets.manage", "tenant:tickets.read", "tenant:leads.manage"] },
    ],
    contacts: [
      { ref: "bea", fullName: "Bea Soto", phone: "+34600000001", email: `bea@${ref}.test` },
      { ref: "gone", fullName: "Gone", phone: "+34600000002", deleted: true },
    ],
    conversations: [
      {
        ref: "c1",
        channel: "wa",
        assignedTo: "ana",
        identity: { externalId: "34600000001", name: "Bea", phone: "+34600000001", contact: "bea" },
      },
    ],
    leads: [{ ref: "l1", customerName: "Bea Soto", contact: "bea", conversation: "c1" }],
    appointments: [
      // The list fixture: dan's day, 2027-06-07 (a Monday).
      {
        ref: "d1",
        assignedTo: "dan",
        title: "D1",
        appointmentType: "visit",
        startsAt: "2027-06-07T10:00:00Z",
        endsAt: "2027-06-07T11:00:00Z",
        contact: "bea",
        lead: "l1",
      },
      {
        ref: "d2",
        assignedTo: "dan",
        title: "D2",
        appointmentType: "call",
        startsAt: "2027-06-07T11:00:00Z",
        endsAt: "2027-06-07T12:00:00Z",
        status: "cancelled",
      },
      {
        ref: "d3",
        assignedTo: "dan",
        title: "D3",
        appointmentType: "visit",
        startsAt: "2027-06-07T12:00:00Z",
        endsAt: "2027-06-07T13:00:00Z",
        status: "completed",
        contact: "bea",
      },
      {
        ref: "d4",
        assignedTo: "dan",
        title: "D4",
        appointmentType: "visit",
        startsAt: "2027-06-08T09:00:00Z",
        endsAt: "2027-06-08T09:30:00Z",
        status: "no_show",
        lead: "l1",
      },
      {
        ref: "e1",
        assignedTo: "eve",
        title: "E1",
        appointmentType: "visit",
        startsAt: "2027-06-07T10:00:00Z",
        endsAt: "2027-06-07T10:30:00Z",
      },
    ],
  });
}

beforeAll(async () => {
  app = await startApp();
  const ids = await app.load(fixture(withData("acme"), withData("other")));
  acme = ids.tenants.acme!;
  other = ids.tenants.other!;
  key = acme.apiKeys.full!.key;
  otherKey = other.apiKeys.full!.key;
});
afterAll(() => app.close());

const count = () => app.db.prisma.appointment.count();
const post = (body: unknown, k: string = key, headers?: Record<string, string>) =>
  app.request("POST", APPT, { key: k, body, headers });
const patch = (id: string, body: unknown, k: string = key) => app.request("PATCH", `${APPT}/${id}`, { key: k, body });
const list = (query: Record<string, string | number | undefined> = {}, k: string = key) =>
  app.request("GET", APPT, { key: k, query });
const row = (id: string) => app.db.prisma.appointment.findFirst({ where: { id } });

function body(over: Record<string, unknown> = {}) {
  return {
    assignedUserId: acme.users.ana,
    title: "Viewing",
    appointmentType: "visit",
    startsAt: "2027-01-04T10:00:00Z",
    endsAt: "2027-01-04T11:00:00Z",
    ...over,
  };
}

/** A window of one hour on its own day (so tests never collide): day n of March 2027, hour h UTC. */
function at(day: number, h: number, m = 0) {
  return new Date(Date.UTC(2027, 2, day, h, m)).toISOString();
}

describe("POST /appointments", () => {
  it("creates a scheduled, manual appointment and returns exactly the spec's fields", async () => {
    const before = await count();
    const r = await post(
      body({
        startsAt: "2027-01-04T11:00:00+01:00",
        endsAt: "2027-01-04T12:30:00+01:00",
        customerId: acme.contacts.bea,
        conversationId: acme.conversations.c1,
        leadId: acme.leads.l1,
        notes: "Bring keys",
      }),
    );
    expect(r.status).toBe(201);
    expect(Object.keys(r.body).sort()).toEqual(KEYS);
    expect(r.body).toMatchObject({
      assignedUserId: acme.users.ana,
      customerId: acme.contacts.bea,
      conversationId: acme.conversations.c1,
      leadId: acme.leads.l1,
      title: "Viewing",
      appointmentType: "visit",
      startsAt: "2027-01-04T10:00:00.000Z",
      endsAt: "2027-01-04T11:30:00.000Z",
      status: "scheduled",
      source: "manual",
      notes: "Bring keys",
      version: 1,
    });
    expect(r.body.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(r.body.createdAt).toBe(r.body.updatedAt);
    expect(await count()).toBe(before + 1);
    const stored = await row(r.body.id);
    expect(stored?.tenantId).toBe(acme.id);
    expect(stored?.source).toBe("manual");
  });

  it("optional fields default to null; bounds at the limit are accepted", async () => {
    const r = await post(
      body({ title: "t".repeat(255), appointmentType: "a".repeat(50), startsAt: at(1, 8), endsAt: at(1, 9) }),
    );
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({ customerId: null, conversationId: null, leadId: null, notes: null });
    expect(r.body.title).toHaveLength(255);
    const n = await post(body({ notes: null, startsAt: at(1, 10), endsAt: at(1, 11) }));
    expect(n.status).toBe(201);
    expect(n.body.notes).toBeNull();
    const long = await post(body({ notes: "n".repeat(10_000), startsAt: at(1, 12), endsAt: at(1, 13) }));
    expect(long.status).toBe(201);
  });

  it("may be booked outside working hours and in the past (manual appointments)", async () => {
    // Sat night
    expect((await post(body({ startsAt: "2027-03-06T22:00:00Z", endsAt: "2027-03-07T01:00:00Z" }))).status).toBe(201);
    expect((await post(body({ startsAt: "2020-01-01T10:00:00Z", endsAt: "2020-01-01T11:00:00Z" }))).status).toBe(201);
  });

  describe("validation → 422 and nothing persisted", () => {
    const cases: [string, Record<string, unknown> | (() => Record<string, unknown>)][] = [
      ["title of 256 characters", { title: "t".repeat(256) }],
      ["empty title", { title: "" }],
      ["appointmentType of 51 characters", { appointmentType: "a".repeat(51) }],
      ["empty appointmentType", { appointmentType: "" }],
      ["endsAt == startsAt", { startsAt: at(2, 10), endsAt: at(2, 10) }],
      ["endsAt before startsAt", { startsAt: at(2, 10), endsAt: at(2, 9) }],
      ["same instant in different offsets", { startsAt: "2027-03-02T10:00:00Z", endsAt: "2027-03-02T11:00:00+01:00" }],
      ["startsAt not a date-time", { startsAt: "tomorrow" }],
      ["startsAt a date only", { startsAt: "2027-03-02" }],
      ["startsAt without an offset", { startsAt: "2027-03-02T10:00:00" }],
      ["endsAt an impossible date", { endsAt: "2027-02-30T10:00:00Z" }],
      ["startsAt a number", { startsAt: 1_800_000_000_000 }],
      ["unknown field", { color: "red" }],
      ["source cannot be sent", { source: "manual" }],
      ["status cannot be sent on create", { status: "scheduled" }],
      ["assignedUserId missing", { assignedUserId: undefined }],
      ["assignedUserId not a UUID", { assignedUserId: "ana" }],
      ["customerId not a UUID", { customerId: "123" }],
      ["leadId a number", { leadId: 5 }],
      ["notes too long", { notes: "n".repeat(10_001) }],
      ["title missing", { title: undefined }],
      ["title not a string", { title: 42 }],
    ];
    for (const [name, over] of cases) {
      it(name, async () => {
        const before = await count();
        const o = typeof over === "function" ? over() : over;
        expectEnvelope(await post(body({ startsAt: at(2, 10), endsAt: at(2, 11), ...o })), 422, "VALIDATION_ERROR");
        expect(await count()).toBe(before);
      });
    }

    it("a body that is not a JSON object", async () => {
      const before = await count();
      expectEnvelope(
        await app.request("POST", APPT, { key, raw: "[]", headers: { "Content-Type": "application/json" } }),
        422,
        "VALIDATION_ERROR",
      );
      expectEnvelope(
        await app.request("POST", APPT, { key, raw: "{", headers: { "Content-Type": "application/json" } }),
        422,
        "VALIDATION_ERROR",
      );
      expect(await count()).toBe(before);
    });

    it("validation comes before 404 (unknown user and a bad title → 422)", async () => {
      expectEnvelope(await post(body({ assignedUserId: randomUuid(), title: "" })), 422, "VALIDATION_ERROR");
    });
  });

  describe("every id must be the tenant's → 404 and nothing persisted", () => {
    const cases: [string, () => Record<string, unknown>][] = [
      ["unknown assignedUserId", () => ({ assignedUserId: randomUuid() })],
      ["foreign assignedUserId", () => ({ assignedUserId: other.users.ana })],
      ["assignedUserId of a user who is not bookable", () => ({ assignedUserId: acme.users.bob })],
      ["unknown customerId", () => ({ customerId: randomUuid() })],
      ["foreign customerId", () => ({ customerId: other.contacts.bea })],
      ["deleted contact as customerId", () => ({ customerId: acme.contacts.gone })],
      ["unknown conversationId", () => ({ conversationId: randomUuid() })],
      ["foreign conversationId", () => ({ conversationId: other.conversations.c1 })],
      ["unknown leadId", () => ({ leadId: randomUuid() })],
      ["foreign leadId", () => ({ leadId: other.leads.l1 })],
      ["a good id next to a foreign one", () => ({ customerId: acme.contacts.bea, leadId: other.leads.l1 })],
    ];
    for (const [name, over] of cases) {
      it(name, async () => {
        const before = await count();
        expectEnvelope(await post(body({ startsAt: at(3, 10), endsAt: at(3, 11), ...over() })), 404, "NOT_FOUND");
        expect(await count()).toBe(before);
      });
    }

    it("404 comes before 409 (a foreign lead on an occupied slot)", async () => {
      expect((await post(body({ startsAt: at(4, 10), endsAt: at(4, 11) }))).status).toBe(201);
      expectEnvelope(
        await post(body({ startsAt: at(4, 10), endsAt: at(4, 11), leadId: other.leads.l1 })),
        404,
        "NOT_FOUND",
      );
    });
  });

  describe("overlap (same user, both scheduled, half-open intervals)", () => {
    // The blocker: ana, day 5, [10:00, 11:00).
    beforeAll(async () => {
      const r = await post(body({ title: "Blocker", startsAt: at(5, 10), endsAt: at(5, 11) }));
      expect(r.status).toBe(201);
    });

    const conflicts: [string, string, string][] = [
      ["contained", at(5, 10, 15), at(5, 10, 45)],
      ["containing", at(5, 9), at(5, 12)],
      ["identical", at(5, 10), at(5, 11)],
      ["same start", at(5, 10), at(5, 10, 30)],
      ["same end", at(5, 10, 30), at(5, 11)],
      ["overlapping the start", at(5, 9, 30), at(5, 10, 1)],
      ["overlapping the end", at(5, 10, 59), at(5, 11, 30)],
    ];
    for (const [name, startsAt, endsAt] of conflicts) {
      it(`${name} → 409 APPOINTMENT_OVERLAP, nothing persisted`, async () => {
        const before = await count();
        const e = expectEnvelope(await post(body({ startsAt, endsAt })), 409, "APPOINTMENT_OVERLAP");
        expect(e.details.conflictingAppointmentId).toEqual(expect.any(String));
        expect(await count()).toBe(before);
      });
    }

    it("the same slot for another user is allowed", async () => {
      expect(
        (await post(body({ assignedUserId: acme.users.cai, startsAt: at(5, 10), endsAt: at(5, 11) }))).status,
      ).toBe(201);
    });

    it("the same slot in another tenant is allowed", async () => {
      expect(
        (await post(body({ assignedUserId: other.users.ana, startsAt: at(5, 10), endsAt: at(5, 11) }), otherKey))
          .status,
      ).toBe(201);
    });

    it("back-to-back on both sides is allowed", async () => {
      expect((await post(body({ startsAt: at(5, 9), endsAt: at(5, 10) }))).status).toBe(201);
      expect((await post(body({ startsAt: at(5, 11), endsAt: at(5, 12) }))).status).toBe(201);
    });

    it("a cancelled, completed or no-show appointment does not block", async () => {
      for (const [i, status] of (["cancelled", "completed", "no_show"] as const).entries()) {
        const r = await post(body({ startsAt: at(6, 10 + i), endsAt: at(6, 11 + i) }));
        expect(r.status).toBe(201);
        expect((await patch(r.body.id, { status })).status).toBe(200);
        expect((await post(body({ startsAt: at(6, 10 + i), endsAt: at(6, 11 + i) }))).status).toBe(201);
      }
    });

    it("20 concurrent creates for one slot → exactly one 201 and nineteen 409", async () => {
      const before = await count();
      const rs = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          post(body({ title: `Race ${i}`, startsAt: at(7, 10), endsAt: at(7, 11) })),
        ),
      );
      const statuses = rs.map((r) => r.status).sort();
      expect(statuses.filter((s) => s === 201)).toHaveLength(1);
      expect(statuses.filter((s) => s === 409)).toHaveLength(19);
      for (const r of rs) if (r.status === 409) expectEnvelope(r, 409, "APPOINTMENT_OVERLAP");
      expect(await count()).toBe(before + 1);
      const inSlot = await app.db.prisma.appointment.count({
        where: { tenantId: acme.id, assignedUserId: acme.users.ana, startsAt: new Date(at(7, 10)) },
      });
      expect(inSlot).toBe(1);
    });

    it("the database constraints are the guard: their violations map to 409 and 422", async () => {
      const data = (startsAt: string, endsAt: string) => ({
        tenantId: acme.id,
        assignedUserId: acme.users.ana!,
        title: "Direct",
        appointmentType: "visit",
        startsAt: new Date(startsAt),
        endsAt: new Date(endsAt),
      });
      const before = await count();
      const overlap = await guardAppointmentWrite(() =>
        app.db.prisma.appointment.create({ data: data(at(5, 10, 30), at(5, 11, 30)) }),
      ).catch((e) => e);
      expect(overlap).toBeInstanceOf(AppError);
      expect(overlap.code).toBe("APPOINTMENT_OVERLAP");
      const order = await guardAppointmentWrite(() =>
        app.db.prisma.appointment.create({ data: data(at(9, 11), at(9, 10)) }),
      ).catch((e) => e);
      expect(order).toBeInstanceOf(AppError);
      expect(order.code).toBe("VALIDATION_ERROR");
      expect(await count()).toBe(before);
      // The same through an update (the PATCH path).
      const mover = await app.db.prisma.appointment.create({ data: data(at(9, 12), at(9, 13)) });
      const moved = await guardAppointmentWrite(() =>
        app.db.prisma.appointment.updateManyAndReturn({
          where: { id: mover.id },
          data: { startsAt: new Date(at(5, 10)), endsAt: new Date(at(5, 11)) },
        }),
      ).catch((e) => e);
      expect(moved).toBeInstanceOf(AppError);
      expect(moved.code).toBe("APPOINTMENT_OVERLAP");
      const reversed = await guardAppointmentWrite(() =>
        app.db.prisma.appointment.updateManyAndReturn({
          where: { id: mover.id },
          data: { startsAt: new Date(at(9, 14)) },
        }),
      ).catch((e) => e);
      expect(reversed.code).toBe("VALIDATION_ERROR");
      expect((await row(mover.id))?.startsAt.toISOString()).toBe(at(9, 12));
      await app.db.prisma.appointment.deleteMany({ where: { id: mover.id } });
    });

    it("concurrent overlapping (not identical) creates → exactly one succeeds", async () => {
      const rs = await Promise.all(
        Array.from({ length: 10 }, (_, i) => post(body({ startsAt: at(8, 10, i * 5), endsAt: at(8, 11, i * 5) }))),
      );
      expect(rs.filter((r) => r.status === 201)).toHaveLength(1);
      expect(rs.filter((r) => r.status === 409)).toHaveLength(9);
    });

    // Every writer of a calendar takes the same lock (routers/appointments/schemas.ts calendarLockSql):
    // on Citus an advisory lock is per node, and the create's statement is planned differently with
    // and without an Idempotency-Key claim. Needs a second transaction open at once (not PGlite).
    it.runIf(onPostgres)(
      "every write path waits for a held calendar lock: creates with and without an Idempotency-Key, a reschedule",
      async () => {
        const moved = await post(body({ title: "To move", startsAt: at(9, 8), endsAt: at(9, 9) }));
        expect(moved.status).toBe(201);
        const release = await holdCalendarLock(app.db, acme.id, acme.users.ana!);
        const done: string[] = [];
        const track = <T>(name: string, p: Promise<T>) => p.finally(() => done.push(name));
        const writes = [
          track("create", post(body({ title: "Locked", startsAt: at(9, 10), endsAt: at(9, 11) }))),
          track(
            "keyed create",
            post(body({ title: "Locked keyed", startsAt: at(9, 12), endsAt: at(9, 13) }), key, {
              "Idempotency-Key": `calendar-${randomUuid()}`,
            }),
          ),
          track("reschedule", patch(moved.body.id, { startsAt: at(9, 14), endsAt: at(9, 15) })),
        ];
        // All three queued behind the lock (read from the server, on Citus from the worker that holds it).
        await waitForLockWaiters(app.testDb, 3, { locktype: "advisory" });
        expect(done).toEqual([]);
        await release();
        expect((await Promise.all(writes)).map((r) => r.status)).toEqual([201, 201, 200]);
      },
    );
  });
});

describe("PATCH /appointments/{appointment_id}", () => {
  async function make(day: number, h = 10, over: Record<string, unknown> = {}) {
    const r = await post(body({ startsAt: at(day, h), endsAt: at(day, h + 1), ...over }));
    expect(r.status).toBe(201);
    return r.body;
  }

  it("moves between every status, in any direction", async () => {
    const a = await make(10);
    for (const status of ["cancelled", "completed", "no_show", "scheduled", "completed", "cancelled", "scheduled"]) {
      const r = await patch(a.id, { status });
      expect(r.status).toBe(200);
      expect(r.body.status).toBe(status);
      expect((await row(a.id))?.status).toBe(status);
    }
  });

  it("returns the full object; updatedAt advances, createdAt does not", async () => {
    const a = await make(11);
    const r = await patch(a.id, { notes: "Call first" });
    expect(r.status).toBe(200);
    expect(Object.keys(r.body).sort()).toEqual(KEYS);
    expect(a.version).toBe(1);
    expect(r.body).toEqual({ ...a, notes: "Call first", updatedAt: r.body.updatedAt, version: 2 });
    expect(Date.parse(r.body.updatedAt)).toBeGreaterThan(Date.parse(a.updatedAt));
    const r2 = await patch(a.id, { notes: null });
    expect(r2.body.notes).toBeNull();
    expect(r2.body.version).toBe(3);
    expect(Date.parse(r2.body.updatedAt)).toBeGreaterThan(Date.parse(r.body.updatedAt));
    expect(r2.body.createdAt).toBe(a.createdAt);
  });

  it("updatedAt advances even with a frozen clock", async () => {
    const a = await make(12);
    app.setNow(new Date(a.updatedAt));
    try {
      const r = await patch(a.id, { status: "completed" });
      expect(Date.parse(r.body.updatedAt)).toBeGreaterThan(Date.parse(a.updatedAt));
    } finally {
      app.setNow(undefined);
    }
  });

  it("{} returns the object unchanged", async () => {
    const a = await make(13);
    const r = await patch(a.id, {});
    expect(r.status).toBe(200);
    expect(r.body).toEqual(a);
  });

  it("reschedules with both bounds, or with one of them", async () => {
    const a = await make(14);
    let r = await patch(a.id, { startsAt: at(14, 14), endsAt: at(14, 15, 30) });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ startsAt: at(14, 14), endsAt: at(14, 15, 30) });
    r = await patch(a.id, { endsAt: at(14, 16) });
    expect(r.body).toMatchObject({ startsAt: at(14, 14), endsAt: at(14, 16) });
    r = await patch(a.id, { startsAt: "2027-03-14T14:30:00+00:00" });
    expect(r.body).toMatchObject({ startsAt: at(14, 14, 30), endsAt: at(14, 16) });
    // Moving into its own old slot never conflicts with itself.
    r = await patch(a.id, { startsAt: at(14, 14), endsAt: at(14, 17) });
    expect(r.status).toBe(200);
  });

  describe("validation → 422 and no change", () => {
    const cases: [string, (a: any) => Record<string, unknown>][] = [
      ["status done", () => ({ status: "done" })],
      ["status null", () => ({ status: null })],
      ["status in another case", () => ({ status: "Scheduled" })],
      ["unknown field", () => ({ title: "New title" })],
      ["assignedUserId cannot be changed", () => ({ assignedUserId: acme.users.cai })],
      ["source cannot be changed", () => ({ source: "api" })],
      ["both bounds reversed", () => ({ startsAt: at(15, 12), endsAt: at(15, 11) })],
      ["both bounds equal", () => ({ startsAt: at(15, 12), endsAt: at(15, 12) })],
      ["startsAt alone moved to the stored endsAt", (a) => ({ startsAt: a.endsAt })],
      ["startsAt alone moved after the stored endsAt", () => ({ startsAt: at(15, 12) })],
      ["endsAt alone moved before the stored startsAt", () => ({ endsAt: at(15, 9) })],
      ["bad date-time", () => ({ startsAt: "15/03/2027 10:00" })],
      ["startsAt null", () => ({ startsAt: null })],
      ["notes a number", () => ({ notes: 5 })],
      ["notes too long", () => ({ notes: "n".repeat(10_001) })],
    ];
    for (const [name, over] of cases) {
      it(name, async () => {
        const a = await make(15);
        expectEnvelope(await patch(a.id, over(a)), 422, "VALIDATION_ERROR");
        const stored = await row(a.id);
        expect(stored?.startsAt.toISOString()).toBe(a.startsAt);
        expect(stored?.endsAt.toISOString()).toBe(a.endsAt);
        expect(stored?.status).toBe("scheduled");
        expect(stored?.updatedAt.toISOString()).toBe(a.updatedAt);
        await patch(a.id, { status: "cancelled" }); // free day 15 for the next case
      });
    }

    it("a malformed appointment_id → 422", async () => {
      expectEnvelope(await patch("not-a-uuid", { status: "cancelled" }), 422, "VALIDATION_ERROR");
    });
  });

  it("unknown or foreign appointment → 404 with no change", async () => {
    expectEnvelope(await patch(randomUuid(), { status: "cancelled" }), 404, "NOT_FOUND");
    const mine = await make(16);
    expectEnvelope(await patch(mine.id, { status: "cancelled", notes: "x" }, otherKey), 404, "NOT_FOUND");
    expectEnvelope(await patch(mine.id, {}, otherKey), 404, "NOT_FOUND");
    const stored = await row(mine.id);
    expect(stored?.status).toBe("scheduled");
    expect(stored?.notes).toBeNull();
  });

  it("a reschedule into an overlap → 409 and no change", async () => {
    const a = await make(17, 10); // [10, 11)
    const b = await make(17, 12); // [12, 13)
    for (const [x, change] of [
      [b, { startsAt: at(17, 10, 30), endsAt: at(17, 11, 30) }],
      [a, { endsAt: at(17, 12, 30) }], // [10:00, 12:30) reaches into b
      [b, { startsAt: at(17, 10, 59) }], // [10:59, 13:00) reaches into a
      [a, { startsAt: at(17, 12), endsAt: at(17, 13) }], // exactly b's slot
      [a, { startsAt: at(17, 12), endsAt: at(17, 13), notes: "moved", status: "scheduled" }],
    ] as const) {
      expectEnvelope(await patch(x.id, change), 409, "APPOINTMENT_OVERLAP");
    }
    for (const x of [a, b]) {
      const stored = await row(x.id);
      expect(stored?.startsAt.toISOString()).toBe(x.startsAt);
      expect(stored?.endsAt.toISOString()).toBe(x.endsAt);
      expect(stored?.notes).toBeNull();
      expect(stored?.updatedAt.toISOString()).toBe(x.updatedAt);
    }
  });

  it("a reschedule that touches back-to-back is allowed", async () => {
    const a = await make(18, 10);
    const b = await make(18, 12);
    const r = await patch(b.id, { startsAt: at(18, 11), endsAt: at(18, 12) });
    expect(r.status).toBe(200);
    void a;
  });

  it("un-cancelling (status scheduled) into an overlap → 409 and no change", async () => {
    const a = await make(19, 10);
    expect((await patch(a.id, { status: "cancelled" })).status).toBe(200);
    const b = await make(19, 10);
    const cancelled = await row(a.id);
    expectEnvelope(await patch(a.id, { status: "scheduled" }), 409, "APPOINTMENT_OVERLAP");
    expectEnvelope(await patch(a.id, { status: "scheduled", notes: "again" }), 409, "APPOINTMENT_OVERLAP");
    const stored = await row(a.id);
    expect(stored?.status).toBe("cancelled");
    expect(stored?.notes).toBeNull();
    expect(stored?.updatedAt.toISOString()).toBe(cancelled?.updatedAt.toISOString());
    // Once b moves away, a may come back.
    expect((await patch(b.id, { startsAt: at(19, 14), endsAt: at(19, 15) })).status).toBe(200);
    expect((await patch(a.id, { status: "scheduled" })).body.status).toBe("scheduled");
  });

  it("a cancelled appointment may be rescheduled onto an occupied slot (it does not block)", async () => {
    const a = await make(20, 10);
    const b = await make(20, 12);
    expect((await patch(b.id, { status: "cancelled" })).status).toBe(200);
    const r = await patch(b.id, { startsAt: at(20, 10), endsAt: at(20, 11) });
    expect(r.status).toBe(200);
    expect(r.body.status).toBe("cancelled");
    // ... but reschedule + un-cancel in one request into a's slot is an overlap.
    expectEnvelope(await patch(b.id, { status: "scheduled" }), 409, "APPOINTMENT_OVERLAP");
    void a;
  });

  it("concurrent reschedules into one slot → exactly one succeeds", async () => {
    const made = [];
    for (let h = 6; h < 16; h++) made.push(await make(21, h));
    const rs = await Promise.all(made.map((a) => patch(a.id, { startsAt: at(22, 10), endsAt: at(22, 11) })));
    expect(rs.filter((r) => r.status === 200)).toHaveLength(1);
    expect(rs.filter((r) => r.status === 409)).toHaveLength(9);
    for (const r of rs) if (r.status !== 200) expectEnvelope(r, 409, "APPOINTMENT_OVERLAP");
    const onDay22 = await app.db.prisma.appointment.count({
      where: { tenantId: acme.id, assignedUserId: acme.users.ana, startsAt: new Date(at(22, 10)) },
    });
    expect(onDay22).toBe(1);
  });

  it("concurrent un-cancels of appointments on one slot → exactly one succeeds", async () => {
    const made = [];
    for (let i = 0; i < 6; i++) {
      const a = await make(23, 10);
      expect((await patch(a.id, { status: "cancelled" })).status).toBe(200);
      made.push(a);
    }
    const rs = await Promise.all(made.map((a) => patch(a.id, { status: "scheduled" })));
    expect(rs.filter((r) => r.status === 200)).toHaveLength(1);
    expect(rs.filter((r) => r.status === 409)).toHaveLength(5);
  });
});

describe("GET /appointments", () => {
  const dan = () => acme.users.dan;
  const titles = (r: any) => r.body.items.map((i: any) => i.title);

  it("returns the envelope, ordered by startsAt then id", async () => {
    const r = await list({ userId: dan() });
    expect(r.status).toBe(200);
    expect(Object.keys(r.body).sort()).toEqual(["items", "nextCursor", "pagination", "stableBefore", "total"]);
    expect(titles(r)).toEqual(["D1", "D2", "D3", "D4"]);
    expect(r.body.total).toBe(4);
    expect(r.body.pagination).toEqual({
      page: 1,
      pageSize: 50,
      totalItems: 4,
      totalPages: 1,
      hasNext: false,
      hasPrev: false,
    });
    expect(Object.keys(r.body.items[0]).sort()).toEqual(KEYS);
    expect(r.body.items[0]).toMatchObject({
      id: acme.appointments.d1,
      assignedUserId: dan(),
      customerId: acme.contacts.bea,
      leadId: acme.leads.l1,
      version: 1,
    });
  });

  it("ties on startsAt are ordered by id", async () => {
    const r = await list({ from: "2027-06-07T10:00:00Z", to: "2027-06-07T10:00:01Z" });
    expect(r.body.items).toHaveLength(2);
    const ids = r.body.items.map((i: any) => i.id);
    expect(ids).toEqual([...ids].sort());
    expect(new Set(ids)).toEqual(new Set([acme.appointments.d1, acme.appointments.e1]));
  });

  it("whole list is ordered and counts every appointment of the tenant only", async () => {
    const r = await list({ limit: 200 });
    const total = await app.db.prisma.appointment.count({ where: { tenantId: acme.id } });
    expect(r.body.total).toBe(total);
    const keys = r.body.items.map((i: any) => [i.startsAt, i.id].join("|"));
    expect(keys).toEqual([...keys].sort());
    const otherIds = new Set(Object.values(other.appointments));
    expect(r.body.items.some((i: any) => otherIds.has(i.id))).toBe(false);
  });

  it("filters by status; an unknown status matches nothing", async () => {
    expect(titles(await list({ userId: dan(), status: "cancelled" }))).toEqual(["D2"]);
    expect(titles(await list({ userId: dan(), status: "completed" }))).toEqual(["D3"]);
    expect(titles(await list({ userId: dan(), status: "no_show" }))).toEqual(["D4"]);
    expect(titles(await list({ userId: dan(), status: "scheduled" }))).toEqual(["D1"]);
    for (const status of ["done", "SCHEDULED", "scheduled,cancelled", " scheduled"]) {
      const r = await list({ status });
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({ items: [], total: 0 });
    }
  });

  it("filters by customerId and leadId", async () => {
    expect(titles(await list({ customerId: acme.contacts.bea, userId: dan() }))).toEqual(["D1", "D3"]);
    expect(titles(await list({ leadId: acme.leads.l1, userId: dan() }))).toEqual(["D1", "D4"]);
    expect(titles(await list({ leadId: acme.leads.l1, customerId: acme.contacts.bea, userId: dan() }))).toEqual(["D1"]);
  });

  it("an unknown or foreign filter id matches nothing (never 404)", async () => {
    for (const q of [
      { userId: randomUuid() },
      { userId: other.users.dan },
      { customerId: randomUuid() },
      { customerId: other.contacts.bea },
      { leadId: randomUuid() },
      { leadId: other.leads.l1 },
    ]) {
      const r = await list(q);
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({ items: [], total: 0 });
    }
  });

  it("a malformed filter → 422", async () => {
    for (const q of [
      { userId: "dan" },
      { customerId: "1" },
      { leadId: "x" },
      { from: "2027-06-07" },
      { to: "yesterday" },
      { from: "2027-06-07T10:00:00" },
      { limit: 0 },
      { limit: 201 },
      { limit: "1.5" },
      { offset: -1 },
    ])
      expectEnvelope(await list(q as any), 422, "VALIDATION_ERROR");
  });

  it("from/to select the appointments intersecting [from, to)", async () => {
    const u = dan();
    // D1 [10,11) D2 [11,12) D3 [12,13) on 06-07, D4 [09:00,09:30) on 06-08.
    expect(titles(await list({ userId: u, from: "2027-06-07T11:00:00Z", to: "2027-06-07T12:00:00Z" }))).toEqual(["D2"]);
    expect(titles(await list({ userId: u, from: "2027-06-07T10:30:00Z", to: "2027-06-07T11:30:00Z" }))).toEqual([
      "D1",
      "D2",
    ]);
    expect(titles(await list({ userId: u, from: "2027-06-07T10:59:59Z", to: "2027-06-07T12:00:01Z" }))).toEqual([
      "D1",
      "D2",
      "D3",
    ]);
    expect(titles(await list({ userId: u, from: "2027-06-07T00:00:00Z", to: "2027-06-07T10:00:00Z" }))).toEqual([]);
    expect(titles(await list({ userId: u, from: "2027-06-07T13:00:00Z", to: "2027-06-08T09:00:00Z" }))).toEqual([]);
    expect(titles(await list({ userId: u, from: "2027-06-07T10:15:00Z", to: "2027-06-07T10:45:00Z" }))).toEqual(["D1"]);
    // Either bound alone.
    expect(titles(await list({ userId: u, from: "2027-06-07T12:30:00Z" }))).toEqual(["D3", "D4"]);
    expect(titles(await list({ userId: u, to: "2027-06-07T11:00:00Z" }))).toEqual(["D1"]);
    // Offsets are honoured: 13:00+02:00 is 11:00Z.
    expect(
      titles(await list({ userId: u, from: "2027-06-07T13:00:00+02:00", to: "2027-06-07T14:00:00+02:00" })),
    ).toEqual(["D2"]);
    // from == to: the appointments containing that instant.
    expect(titles(await list({ userId: u, from: "2027-06-07T10:30:00Z", to: "2027-06-07T10:30:00Z" }))).toEqual(["D1"]);
  });

  it("from after to → 422", async () => {
    expectEnvelope(await list({ from: "2027-06-08T00:00:00Z", to: "2027-06-07T00:00:00Z" }), 422, "VALIDATION_ERROR");
  });

  it("paginates with offset and limit", async () => {
    const u = dan();
    let r = await list({ userId: u, limit: 2 });
    expect(titles(r)).toEqual(["D1", "D2"]);
    expect(r.body.total).toBe(4);
    expect(r.body.pagination).toEqual({
      page: 1,
      pageSize: 2,
      totalItems: 4,
      totalPages: 2,
      hasNext: true,
      hasPrev: false,
    });
    r = await list({ userId: u, limit: 2, offset: 2 });
    expect(titles(r)).toEqual(["D3", "D4"]);
    expect(r.body.pagination).toEqual({
      page: 2,
      pageSize: 2,
      totalItems: 4,
      totalPages: 2,
      hasNext: false,
      hasPrev: true,
    });
    r = await list({ userId: u, limit: 3, offset: 1 });
    expect(titles(r)).toEqual(["D2", "D3", "D4"]);
    r = await list({ userId: u, offset: 10 });
    expect(r.body).toMatchObject({ items: [], total: 4 });
    r = await list({ userId: u, limit: 1, unknownParam: "x" });
    expect(titles(r)).toEqual(["D1"]);
    // An empty query value is the same as an absent one.
    r = await list({ userId: u, status: "", limit: "" as any });
    expect(r.body.total).toBe(4);
  });
});

describe("scopes, isolation, idempotency", () => {
  it("missing scope → 403 PERMISSION_DENIED, nothing persisted", async () => {
    const none = acme.apiKeys.none!.key;
    const read = acme.apiKeys.read!.key;
    const manage = acme.apiKeys.manage!.key;
    const tix = acme.apiKeys.tix!.key;
    const before = await count();
    const a = acme.appointments.d1!;
    for (const k of [none, read, tix]) {
      expectEnvelope(await post(body({ startsAt: at(25, 10), endsAt: at(25, 11) }), k), 403, "PERMISSION_DENIED");
      expectEnvelope(await patch(a, { status: "cancelled" }, k), 403, "PERMISSION_DENIED");
    }
    for (const k of [none, manage, tix]) expectEnvelope(await list({}, k), 403, "PERMISSION_DENIED");
    // The scope check comes before validation.
    expectEnvelope(await post({ bogus: true }, read), 403, "PERMISSION_DENIED");
    expectEnvelope(await patch("not-a-uuid", { status: "x" }, read), 403, "PERMISSION_DENIED");
    expect(await count()).toBe(before);
    expect((await row(a))?.status).toBe("scheduled");
    // The right scope alone is enough.
    expect((await list({}, read)).status).toBe(200);
    expect((await post(body({ startsAt: at(25, 10), endsAt: at(25, 11) }), manage)).status).toBe(201);
  });

  it("no key → 401", async () => {
    expectEnvelope(await app.request("GET", APPT), 401, "INVALID_CREDENTIALS");
  });

  it("another tenant's appointment is invisible and untouchable", async () => {
    const r = await list({ limit: 200 }, otherKey);
    expect(r.body.items.some((i: any) => i.id === acme.appointments.d1)).toBe(false);
    expectEnvelope(
      await patch(acme.appointments.d1!, { startsAt: at(26, 10), endsAt: at(26, 11) }, otherKey),
      404,
      "NOT_FOUND",
    );
    expect((await row(acme.appointments.d1!))?.startsAt.toISOString()).toBe("2027-06-07T10:00:00.000Z");
  });

  it("Idempotency-Key replays the create without a second appointment", async () => {
    const before = await count();
    const b = body({ startsAt: at(27, 10), endsAt: at(27, 11), notes: "idem" });
    const first = await post(b, key, { "Idempotency-Key": "appt-1" });
    expect(first.status).toBe(201);
    const again = await post({ ...b }, key, { "Idempotency-Key": "appt-1" });
    expect(again.status).toBe(201);
    expect(again.body).toEqual(first.body);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(await count()).toBe(before + 1);
    expectEnvelope(
      await post({ ...b, notes: "other" }, key, { "Idempotency-Key": "appt-1" }),
      422,
      "IDEMPOTENCY_KEY_REUSE_MISMATCH",
    );
    // Without the key the same body is a new create, which overlaps → 409.
    expectEnvelope(await post(b), 409, "APPOINTMENT_OVERLAP");
    expect(await count()).toBe(before + 1);
  });

  it("a failed create is not remembered under its Idempotency-Key", async () => {
    const b = body({ startsAt: at(28, 10), endsAt: at(28, 11), leadId: randomUuid() });
    expectEnvelope(await post(b, key, { "Idempotency-Key": "appt-2" }), 404, "NOT_FOUND");
    const { leadId: _drop, ...ok } = b as Record<string, unknown>;
    const r = await post(ok, key, { "Idempotency-Key": "appt-2" });
    expect(r.status).toBe(201);
  });

  it("concurrent duplicates with one Idempotency-Key create one appointment", async () => {
    const before = await count();
    const b = body({ startsAt: at(29, 10), endsAt: at(29, 11) });
    const rs = await Promise.all(Array.from({ length: 5 }, () => post(b, key, { "Idempotency-Key": "appt-3" })));
    expect(rs.map((r) => r.status)).toEqual([201, 201, 201, 201, 201]);
    expect(new Set(rs.map((r) => r.body.id)).size).toBe(1);
    expect(await count()).toBe(before + 1);
  });
});
