// GET /availability over HTTP: slots from weekly working hours in the tenant's time zone (across DST
// changes), minus scheduled appointments and the past; the choice of user without userId; degraded
// answers; range validation; tenant isolation and scopes. The clock is fixed with app.setNow.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { TenantIds } from "../../server/admin/fixture.js";
import { expectEnvelope, randomUuid, startApp, type TestApp } from "../helpers/app.js";
import { fixture, tenant } from "../helpers/fixtures.js";

const AVAIL = "/public/v1/availability";
const WEEKDAYS = [1, 2, 3, 4, 5];
const nineToFive = WEEKDAYS.map((weekday) => ({ weekday, start: "09:00", end: "17:00" }));
const CLOCK = new Date("2027-01-01T00:00:00Z");
const quota = { perMinute: 100_000, perDay: 1_000_000 };

let app: TestApp;
let acme: TenantIds;
let other: TenantIds;
let pol: TenantIds;
let tie: TenantIds;
let nos: TenantIds;
let empty: TenantIds;
let kol: TenantIds;

const k = (t: TenantIds, ref = "full") => t.apiKeys[ref]!.key;
const keys = [{ ref: "full", owner: "ana", scopes: "all" as const }];

beforeAll(async () => {
  app = await startApp();
  const ids = await app.load(
    fixture(
      tenant("acme", {
        rateLimit: quota,
        users: [
          { ref: "ana", name: "Ana", email: "ana@acme.test", bookable: true, workingHours: nineToFive },
          { ref: "bob", name: "Bob", email: "bob@acme.test", bookable: false, workingHours: nineToFive },
          { ref: "noh", name: "No Hours", email: "noh@acme.test", bookable: true },
          {
            ref: "sun",
            name: "Sunday",
            email: "sun@acme.test",
            bookable: true,
            workingHours: [{ weekday: 0, start: "00:00", end: "24:00" }],
          },
          {
            ref: "odd",
            name: "Odd",
            email: "odd@acme.test",
            bookable: true,
            workingHours: [
              { weekday: 1, start: "09:10", end: "12:00" },
              { weekday: 1, start: "14:00", end: "15:00" },
              { weekday: 2, start: "09:00", end: "12:00" },
              { weekday: 2, start: "11:00", end: "13:00" },
            ],
          },
        ],
        apiKeys: [
          { ref: "full", owner: "ana", scopes: "all" },
          { ref: "none", owner: "ana", scopes: [] },
          { ref: "manage", owner: "ana", scopes: ["tenant:appointments.manage"] },
          { ref: "leads", owner: "ana", scopes: ["tenant:leads.read", "tenant:leads.manage"] },
          { ref: "read", owner: "ana", scopes: ["tenant:appointments.read"] },
        ],
        appointments: [
          // Wednesday 2027-03-31 (CEST, UTC+2): 11:15–12:10 local splits ana's day.
          {
            ref: "split",
            assignedTo: "ana",
            title: "Split",
            appointmentType: "visit",
            startsAt: "2027-03-31T09:15:00Z",
            endsAt: "2027-03-31T10:10:00Z",
          },
          // Not blocking: cancelled, completed, no-show ones on the same day.
          {
            ref: "c",
            assignedTo: "ana",
            title: "C",
            appointmentType: "visit",
            status: "cancelled",
            startsAt: "2027-03-31T07:00:00Z",
            endsAt: "2027-03-31T08:00:00Z",
          },
          {
            ref: "d",
            assignedTo: "ana",
            title: "D",
            appointmentType: "visit",
            status: "completed",
            startsAt: "2027-03-31T12:00:00Z",
            endsAt: "2027-03-31T13:00:00Z",
          },
          {
            ref: "n",
            assignedTo: "ana",
            title: "N",
            appointmentType: "visit",
            status: "no_show",
            startsAt: "2027-03-31T13:00:00Z",
            endsAt: "2027-03-31T14:00:00Z",
          },
          // Another user's appointment at the same time does not touch ana's slots.
          {
            ref: "b",
            assignedTo: "bob",
            title: "B",
            appointmentType: "visit",
            startsAt: "2027-03-31T07:00:00Z",
            endsAt: "2027-03-31T15:00:00Z",
          },
        ],
      }),
      tenant("other", {
        rateLimit: quota,
        users: [{ ref: "ana", name: "Ana", email: "ana@other.test", bookable: true, workingHours: nineToFive }],
        apiKeys: keys,
        appointments: [
          {
            ref: "x",
            assignedTo: "ana",
            title: "X",
            appointmentType: "visit",
            startsAt: "2027-03-31T07:00:00Z",
            endsAt: "2027-03-31T15:00:00Z",
          },
        ],
      }),
      tenant("pol", {
        rateLimit: quota,
        users: [
          { ref: "ana", name: "Ana", email: "ana@pol.test", bookable: false },
          {
            ref: "late",
            name: "Late",
            email: "late@pol.test",
            bookable: true,
            workingHours: [{ weekday: 1, start: "13:00", end: "17:00" }],
          },
          {
            ref: "early",
            name: "Early",
            email: "early@pol.test",
            bookable: true,
            workingHours: [{ weekday: 1, start: "09:00", end: "12:00" }],
          },
        ],
        apiKeys: keys,
        appointments: [
          // Monday 2027-04-12: early is booked all morning, so late has the earliest free slot.
          {
            ref: "full",
            assignedTo: "early",
            title: "Busy",
            appointmentType: "visit",
            startsAt: "2027-04-12T07:00:00Z",
            endsAt: "2027-04-12T10:00:00Z",
          },
        ],
      }),
      tenant("tie", {
        rateLimit: quota,
        users: [
          { ref: "ana", name: "Ana", email: "ana@tie.test", bookable: false },
          { ref: "t1", name: "T1", email: "t1@tie.test", bookable: true, workingHours: nineToFive },
          { ref: "t2", name: "T2", email: "t2@tie.test", bookable: true, workingHours: nineToFive },
        ],
        apiKeys: keys,
      }),
      tenant("nos", {
        rateLimit: quota,
        users: [
          { ref: "ana", name: "Ana", email: "ana@nos.test", bookable: false },
          { ref: "n1", name: "N1", email: "n1@nos.test", bookable: true },
          { ref: "n2", name: "N2", email: "n2@nos.test", bookable: true, workingHours: nineToFive },
        ],
        apiKeys: keys,
      }),
      tenant("empty", {
        rateLimit: quota,
        users: [{ ref: "ana", name: "Ana", email: "ana@empty.test", bookable: false, workingHours: nineToFive }],
        apiKeys: keys,
      }),
      tenant("kol", {
        rateLimit: quota,
        timezone: "Asia/Kolkata",
        slotMinutes: 45,
        users: [{ ref: "ana", name: "Ana", email: "ana@kol.test", bookable: true, workingHours: nineToFive }],
        apiKeys: keys,
      }),
    ),
  );
  const t = ids.tenants;
  [acme, other, pol, tie, nos, empty, kol] = [t.acme!, t.other!, t.pol!, t.tie!, t.nos!, t.empty!, t.kol!];
});
beforeEach(() => app.setNow(CLOCK));
afterAll(() => app.close());

type Slot = { startsAt: string; endsAt: string; userId: string };
const get = (t: TenantIds, query: Record<string, string | undefined>, ref = "full") =>
  app.request("GET", AVAIL, { key: k(t, ref), query });
async function slots(t: TenantIds, query: Record<string, string | undefined>): Promise<Slot[]> {
  const r = await get(t, query);
  expect(r.status, r.text).toBe(200);
  expect(r.body.degraded).toBe(false);
  expect(r.body.degradedReason).toBeNull();
  return r.body.slots;
}
const starts = (s: Slot[]) => s.map((x) => x.startsAt);
const day = (s: Slot[], d: string) => s.filter((x) => x.startsAt.startsWith(d));

describe("slots", () => {
  it("returns exactly {slots, degraded, degradedReason}; each slot {startsAt, endsAt, userId}", async () => {
    const r = await get(acme, { from: "2027-03-01", to: "2027-03-01", userId: acme.users.ana });
    expect(r.status).toBe(200);
    expect(Object.keys(r.body).sort()).toEqual(["degraded", "degradedReason", "slots"]);
    expect(r.body.degraded).toBe(false);
    expect(r.body.degradedReason).toBeNull();
    expect(r.body.slots).toHaveLength(16);
    expect(Object.keys(r.body.slots[0]).sort()).toEqual(["endsAt", "startsAt", "userId"]);
    // Monday 2027-03-01 is winter time in Madrid (UTC+1): 09:00–17:00 local = 08:00–16:00Z.
    expect(r.body.slots[0]).toEqual({
      startsAt: "2027-03-01T08:00:00.000Z",
      endsAt: "2027-03-01T08:30:00.000Z",
      userId: acme.users.ana,
    });
    expect(r.body.slots[15]).toEqual({
      startsAt: "2027-03-01T15:30:00.000Z",
      endsAt: "2027-03-01T16:00:00.000Z",
      userId: acme.users.ana,
    });
    // Contiguous, slotMinutes long, in order.
    for (const [i, s] of (r.body.slots as Slot[]).entries()) {
      expect(Date.parse(s.endsAt) - Date.parse(s.startsAt)).toBe(30 * 60_000);
      if (i) expect(s.startsAt).toBe(r.body.slots[i - 1].endsAt);
    }
  });

  it("spring DST change (Europe/Madrid, 2027-03-28): 09:00–17:00 local moves an hour earlier in UTC", async () => {
    const s = await slots(acme, { from: "2027-03-26", to: "2027-03-29", userId: acme.users.ana });
    // Friday (UTC+1), no weekend slots, Monday (UTC+2).
    expect(day(s, "2027-03-26")).toHaveLength(16);
    expect(day(s, "2027-03-27")).toHaveLength(0);
    expect(day(s, "2027-03-28")).toHaveLength(0);
    expect(day(s, "2027-03-29")).toHaveLength(16);
    expect(s).toHaveLength(32);
    expect(day(s, "2027-03-26")[0]!.startsAt).toBe("2027-03-26T08:00:00.000Z");
    expect(day(s, "2027-03-26").at(-1)!.endsAt).toBe("2027-03-26T16:00:00.000Z");
    expect(day(s, "2027-03-29")[0]!.startsAt).toBe("2027-03-29T07:00:00.000Z");
    expect(day(s, "2027-03-29").at(-1)!.endsAt).toBe("2027-03-29T15:00:00.000Z");
  });

  it("autumn DST change (Europe/Madrid, 2026-10-25): 09:00–17:00 local moves an hour later in UTC", async () => {
    app.setNow(new Date("2026-10-01T00:00:00Z"));
    const s = await slots(acme, { from: "2026-10-23", to: "2026-10-26", userId: acme.users.ana });
    expect(s).toHaveLength(32);
    expect(day(s, "2026-10-23")[0]!.startsAt).toBe("2026-10-23T07:00:00.000Z");
    expect(day(s, "2026-10-26")[0]!.startsAt).toBe("2026-10-26T08:00:00.000Z");
    expect(day(s, "2026-10-26").at(-1)!.endsAt).toBe("2026-10-26T16:00:00.000Z");
  });

  it("a whole-day shift on the DST Sunday has 23 (spring) or 25 (autumn) hours of slots", async () => {
    const spring = await slots(acme, { from: "2027-03-28", to: "2027-03-28", userId: acme.users.sun });
    expect(spring).toHaveLength(46);
    expect(spring[0]!.startsAt).toBe("2027-03-27T23:00:00.000Z"); // 00:00 CET
    expect(spring.at(-1)!.endsAt).toBe("2027-03-28T22:00:00.000Z"); // 24:00 CEST
    for (const [i, x] of spring.entries()) if (i) expect(x.startsAt).toBe(spring[i - 1]!.endsAt);
    app.setNow(new Date("2026-10-01T00:00:00Z"));
    const autumn = await slots(acme, { from: "2026-10-25", to: "2026-10-25", userId: acme.users.sun });
    expect(autumn).toHaveLength(50);
    expect(autumn[0]!.startsAt).toBe("2026-10-24T22:00:00.000Z"); // 00:00 CEST
    expect(autumn.at(-1)!.endsAt).toBe("2026-10-25T23:00:00.000Z"); // 24:00 CET
  });

  it("weekends have no slots", async () => {
    expect(await slots(acme, { from: "2027-04-10", to: "2027-04-11", userId: acme.users.ana })).toEqual([]);
  });

  it("an appointment splitting a day removes exactly the intersecting slots (others' and non-scheduled ones do not)", async () => {
    const s = await slots(acme, { from: "2027-03-31", to: "2027-03-31", userId: acme.users.ana });
    // 09:00–17:00 CEST = 07:00–15:00Z; the appointment 09:15–10:10Z hits 09:00, 09:30 and 10:00Z.
    expect(s).toHaveLength(13);
    const got = starts(s);
    for (const gone of ["09:00", "09:30", "10:00"]) expect(got).not.toContain(`2027-03-31T${gone}:00.000Z`);
    expect(got).toContain("2027-03-31T08:30:00.000Z");
    expect(got).toContain("2027-03-31T10:30:00.000Z");
    expect(got[0]).toBe("2027-03-31T07:00:00.000Z");
  });

  it("an appointment booked through the API removes its slots at once; cancelling it frees them", async () => {
    const before = await slots(acme, { from: "2027-04-01", to: "2027-04-01", userId: acme.users.ana });
    expect(before).toHaveLength(16);
    const created = await app.request("POST", "/public/v1/appointments", {
      key: k(acme),
      body: {
        assignedUserId: acme.users.ana,
        title: "T",
        appointmentType: "visit",
        startsAt: "2027-04-01T10:00:00Z",
        endsAt: "2027-04-01T11:00:00Z",
      },
    });
    expect(created.status).toBe(201);
    const after = await slots(acme, { from: "2027-04-01", to: "2027-04-01", userId: acme.users.ana });
    expect(after).toHaveLength(14);
    expect(starts(after)).not.toContain("2027-04-01T10:00:00.000Z");
    expect(starts(after)).not.toContain("2027-04-01T10:30:00.000Z");
    // Booking a returned slot succeeds; the slot then disappears.
    const slot = after[0]!;
    const booked = await app.request("POST", "/public/v1/appointments", {
      key: k(acme),
      body: {
        assignedUserId: slot.userId,
        title: "S",
        appointmentType: "visit",
        startsAt: slot.startsAt,
        endsAt: slot.endsAt,
      },
    });
    expect(booked.status).toBe(201);
    expect(await slots(acme, { from: "2027-04-01", to: "2027-04-01", userId: acme.users.ana })).toHaveLength(13);
    for (const id of [created.body.id, booked.body.id])
      expect(
        (await app.request("PATCH", `/public/v1/appointments/${id}`, { key: k(acme), body: { status: "cancelled" } }))
          .status,
      ).toBe(200);
    expect(await slots(acme, { from: "2027-04-01", to: "2027-04-01", userId: acme.users.ana })).toHaveLength(16);
  });

  it("never returns a slot that starts before now", async () => {
    app.setNow(new Date("2027-03-26T10:10:00Z")); // Friday, 11:10 local
    const s = await slots(acme, { from: "2027-03-26", to: "2027-03-29", userId: acme.users.ana });
    expect(day(s, "2027-03-26")[0]!.startsAt).toBe("2027-03-26T10:30:00.000Z");
    expect(day(s, "2027-03-26")).toHaveLength(11);
    expect(day(s, "2027-03-29")).toHaveLength(16);
    // Exactly at a slot's start, that slot is still offered.
    app.setNow(new Date("2027-03-26T10:30:00Z"));
    expect((await slots(acme, { from: "2027-03-26", to: "2027-03-26", userId: acme.users.ana }))[0]!.startsAt).toBe(
      "2027-03-26T10:30:00.000Z",
    );
    // A range wholly in the past is empty, and not degraded.
    app.setNow(new Date("2027-06-01T00:00:00Z"));
    expect(await slots(acme, { from: "2027-03-01", to: "2027-03-31", userId: acme.users.ana })).toEqual([]);
  });

  it("slots align to the working-hours start, lie entirely inside it, and merge overlapping entries", async () => {
    // Monday: 09:10–12:00 and 14:00–15:00 local (CET on 2027-03-01).
    const mon = await slots(acme, { from: "2027-03-01", to: "2027-03-01", userId: acme.users.odd });
    expect(starts(mon)).toEqual([
      "2027-03-01T08:10:00.000Z",
      "2027-03-01T08:40:00.000Z",
      "2027-03-01T09:10:00.000Z",
      "2027-03-01T09:40:00.000Z",
      "2027-03-01T10:10:00.000Z", // 11:10–11:40 local; 11:40–12:10 would overrun
      "2027-03-01T13:00:00.000Z",
      "2027-03-01T13:30:00.000Z",
    ]);
    // Tuesday: 09:00–12:00 and 11:00–13:00 are one span 09:00–13:00 (8 slots, none duplicated).
    const tue = await slots(acme, { from: "2027-03-02", to: "2027-03-02", userId: acme.users.odd });
    expect(tue).toHaveLength(8);
    expect(new Set(starts(tue)).size).toBe(8);
  });

  it("uses the tenant's slotMinutes and time zone (Asia/Kolkata, 45 minutes)", async () => {
    const s = await slots(kol, { from: "2027-03-01", to: "2027-03-01" });
    // 09:00 IST = 03:30Z; 45-minute slots, the last that fits ends at 16:30 IST = 11:00Z.
    expect(s).toHaveLength(10);
    expect(s[0]).toEqual({
      startsAt: "2027-03-01T03:30:00.000Z",
      endsAt: "2027-03-01T04:15:00.000Z",
      userId: kol.users.ana,
    });
    expect(s.at(-1)!.endsAt).toBe("2027-03-01T11:00:00.000Z");
  });

  it("a 31-day range is accepted and covers both ends", async () => {
    const s = await slots(acme, { from: "2027-03-01", to: "2027-03-31", userId: acme.users.ana });
    expect(s[0]!.startsAt).toBe("2027-03-01T08:00:00.000Z");
    expect(s.at(-1)!.endsAt).toBe("2027-03-31T15:00:00.000Z");
    // 23 weekdays × 16 slots, minus the 3 taken on 03-31.
    expect(s).toHaveLength(23 * 16 - 3);
  });
});

describe("degraded", () => {
  it('a bookable user without working hours → empty slots, degraded "no_working_hours"', async () => {
    const r = await get(acme, { from: "2027-03-01", to: "2027-03-07", userId: acme.users.noh });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ slots: [], degraded: true, degradedReason: "no_working_hours" });
  });
});

describe("choice of user without userId", () => {
  it("picks the bookable user with the earliest free slot", async () => {
    const s = await slots(pol, { from: "2027-04-05", to: "2027-04-05" });
    expect(s).toHaveLength(6);
    expect(new Set(s.map((x) => x.userId))).toEqual(new Set([pol.users.early]));
    // When early's morning is booked, late has the earliest free slot.
    const s2 = await slots(pol, { from: "2027-04-12", to: "2027-04-12" });
    expect(s2).toHaveLength(8);
    expect(s2[0]).toMatchObject({ startsAt: "2027-04-12T11:00:00.000Z", userId: pol.users.late });
    // Over both Mondays, early's free slot on 04-05 is the earliest.
    expect((await slots(pol, { from: "2027-04-05", to: "2027-04-12" }))[0]!.userId).toBe(pol.users.early);
  });

  it("ties on the earliest slot go to fewer scheduled appointments in the range, then to the lower id", async () => {
    const [lo, hi] = [tie.users.t1!, tie.users.t2!].sort();
    expect((await slots(tie, { from: "2027-04-05", to: "2027-04-05" }))[0]!.userId).toBe(lo);
    const r = await app.request("POST", "/public/v1/appointments", {
      key: k(tie),
      body: {
        assignedUserId: lo,
        title: "T",
        appointmentType: "visit",
        startsAt: "2027-04-05T13:00:00Z",
        endsAt: "2027-04-05T14:00:00Z",
      },
    });
    expect(r.status).toBe(201);
    // Both still start at 09:00 local, but lo now has one appointment in the range.
    const s = await slots(tie, { from: "2027-04-05", to: "2027-04-05" });
    expect(s[0]).toMatchObject({ startsAt: "2027-04-05T07:00:00.000Z", userId: hi });
    expect(s).toHaveLength(16);
    // Outside that range the tie goes back to lo.
    expect((await slots(tie, { from: "2027-04-06", to: "2027-04-06" }))[0]!.userId).toBe(lo);
  });

  it("when nobody has a free slot, the same tie-breaks pick the user and slots are empty", async () => {
    const [n1, n2] = [nos.users.n1!, nos.users.n2!];
    const weekend = { from: "2027-04-10", to: "2027-04-11" };
    // Nobody has a slot on a weekend; both have 0 appointments → the lower id. Only n1 lacks hours.
    const r = await get(nos, weekend);
    expect(r.status).toBe(200);
    expect(r.body.slots).toEqual([]);
    expect(r.body.degraded).toBe(n1 < n2);
    // Give the lower id an appointment in the range: the other one is picked.
    const [lo] = [n1, n2].sort();
    const booked = await app.request("POST", "/public/v1/appointments", {
      key: k(nos),
      body: {
        assignedUserId: lo,
        title: "Sat",
        appointmentType: "visit",
        startsAt: "2027-04-10T09:00:00Z",
        endsAt: "2027-04-10T10:00:00Z",
      },
    });
    expect(booked.status).toBe(201);
    const r2 = await get(nos, weekend);
    expect(r2.body.slots).toEqual([]);
    expect(r2.body.degraded).toBe(lo !== n1);
    expect(r2.body.degradedReason).toBe(lo !== n1 ? "no_working_hours" : null);
    // With a weekday in the range, n2 (the only one with hours) wins and the answer is not degraded.
    const s = await slots(nos, { from: "2027-04-09", to: "2027-04-10" });
    expect(s[0]!.userId).toBe(n2);
  });

  it("nobody bookable → 404 NOT_FOUND", async () => {
    expectEnvelope(await get(empty, { from: "2027-04-05", to: "2027-04-05" }), 404, "NOT_FOUND");
  });
});

describe("userId", () => {
  it("unknown, foreign or not bookable → 404", async () => {
    for (const userId of [randomUuid(), other.users.ana!, acme.users.bob!, empty.users.ana!])
      expectEnvelope(await get(acme, { from: "2027-03-01", to: "2027-03-01", userId }), 404, "NOT_FOUND");
    expectEnvelope(
      await get(empty, { from: "2027-04-05", to: "2027-04-05", userId: empty.users.ana }),
      404,
      "NOT_FOUND",
    );
  });

  it("another tenant's appointments never affect the slots", async () => {
    // other's ana is booked all day on 03-31; acme's ana keeps her own picture.
    expect(await slots(acme, { from: "2027-03-31", to: "2027-03-31", userId: acme.users.ana })).toHaveLength(13);
    expect(await slots(other, { from: "2027-03-31", to: "2027-03-31" })).toEqual([]);
  });

  it("a malformed userId → 422", async () => {
    expectEnvelope(await get(acme, { from: "2027-03-01", to: "2027-03-01", userId: "ana" }), 422, "VALIDATION_ERROR");
  });
});

describe("range validation → 422", () => {
  const cases: [string, Record<string, string | undefined>][] = [
    ["from after to", { from: "2027-03-02", to: "2027-03-01" }],
    ["32 days", { from: "2027-03-01", to: "2027-04-01" }],
    ["a whole year", { from: "2027-01-01", to: "2027-12-31" }],
    ["an impossible date", { from: "2027-02-30", to: "2027-03-01" }],
    ["February 29 of a common year", { from: "2027-02-28", to: "2027-02-29" }],
    ["month 13", { from: "2027-13-01", to: "2027-13-02" }],
    ["no zero padding", { from: "2027-3-1", to: "2027-03-02" }],
    ["a date-time instead of a date", { from: "2027-03-01T00:00:00Z", to: "2027-03-02" }],
    ["compact form", { from: "20270301", to: "2027-03-02" }],
    ["words", { from: "today", to: "tomorrow" }],
    ["from missing", { to: "2027-03-02" }],
    ["to missing", { from: "2027-03-02" }],
    ["both missing", {}],
  ];
  for (const [name, q] of cases)
    it(name, async () => {
      expectEnvelope(await get(acme, { ...q, userId: acme.users.ana }), 422, "VALIDATION_ERROR");
    });

  it("validation comes before 404 (bad range, unknown user)", async () => {
    expectEnvelope(
      await get(acme, { from: "2027-03-02", to: "2027-03-01", userId: randomUuid() }),
      422,
      "VALIDATION_ERROR",
    );
    expectEnvelope(await get(empty, { from: "2027-03-02", to: "2027-03-01" }), 422, "VALIDATION_ERROR");
  });

  it("a leap day and a single day are fine", async () => {
    expect((await get(acme, { from: "2028-02-29", to: "2028-02-29", userId: acme.users.ana })).status).toBe(200);
  });
});

describe("scopes", () => {
  it("needs tenant:appointments.read", async () => {
    const q = { from: "2027-03-01", to: "2027-03-01" };
    for (const ref of ["none", "manage", "leads"]) expectEnvelope(await get(acme, q, ref), 403, "PERMISSION_DENIED");
    // Scope before validation.
    expectEnvelope(await get(acme, { from: "x" }, "none"), 403, "PERMISSION_DENIED");
    expect((await get(acme, q, "read")).status).toBe(200);
  });

  it("no key → 401", async () => {
    expectEnvelope(
      await app.request("GET", AVAIL, { query: { from: "2027-03-01", to: "2027-03-01" } }),
      401,
      "INVALID_CREDENTIALS",
    );
  });
});
