// The linear slot sweep of GET /availability gives exactly the slots of the direct
// definition (every slot checked against every busy interval), on random hours, appointments,
// clocks, slot lengths and time zones (with DST changes). The HTTP behaviour is in availability.test.ts.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  firstFreeSlot,
  freeSlots,
  workingIntervals,
  type Interval,
  type SlotQuery,
} from "../../routers/availability/slots.js";

/**
 * The definition, quadratic: a slot of a working interval is free when
 * no busy interval intersects it and it does not start before now.
 */
function reference(q: SlotQuery): Interval[] {
  const step = q.slotMinutes * 60_000;
  const out: Interval[] = [];
  for (const w of workingIntervals(q)) {
    for (let s = w.startsAt.getTime(); s + step <= w.endsAt.getTime(); s += step) {
      const e = s + step;
      if (s < q.now.getTime()) continue;
      if (q.busy.some((b) => b.startsAt.getTime() < e && s < b.endsAt.getTime())) continue;
      out.push({ startsAt: new Date(s), endsAt: new Date(e) });
    }
  }
  return out;
}

const FROM = Date.UTC(2026, 2, 20); // spans the March DST change in Europe and the US
const hhmm = fc
  .integer({ min: 0, max: 96 })
  .map((q) => `${String(Math.floor((q * 15) / 60)).padStart(2, "0")}:${String((q * 15) % 60).padStart(2, "0")}`);
const query = fc.record({
  zone: fc.constantFrom("UTC", "Europe/Madrid", "America/New_York", "Asia/Kolkata", "Australia/Lord_Howe"),
  days: fc.integer({ min: 1, max: 12 }),
  slotMinutes: fc.constantFrom(5, 15, 30, 45, 60, 90),
  workingHours: fc.array(fc.record({ weekday: fc.integer({ min: 0, max: 6 }), start: hhmm, end: hhmm }), {
    maxLength: 10,
  }),
  busy: fc.array(
    fc
      .tuple(fc.integer({ min: -2 * 1440, max: 14 * 1440 }), fc.integer({ min: 1, max: 3 * 1440 }))
      .map(([startMin, lenMin]) => ({
        startsAt: new Date(FROM + startMin * 60_000),
        endsAt: new Date(FROM + (startMin + lenMin) * 60_000),
      })),
    { maxLength: 40 },
  ),
  nowMin: fc.integer({ min: -1440, max: 14 * 1440 }),
});

describe("availability slot sweep", () => {
  it("equals the direct definition (1,000 random cases)", () => {
    fc.assert(
      fc.property(query, (c) => {
        const q: SlotQuery = {
          zone: c.zone,
          fromDay: new Date(FROM).toISOString().slice(0, 10),
          toDay: new Date(FROM + (c.days - 1) * 86_400_000).toISOString().slice(0, 10),
          slotMinutes: c.slotMinutes,
          workingHours: c.workingHours,
          busy: c.busy,
          now: new Date(FROM + c.nowMin * 60_000),
        };
        const expected = reference(q);
        expect(freeSlots(q)).toEqual(expected);
        expect(firstFreeSlot(q)).toEqual(expected[0]);
        expect(freeSlots({ ...q, intervals: workingIntervals(q) })).toEqual(expected);
      }),
      { numRuns: 1_000, seed: 20261123 },
    );
  });
});
