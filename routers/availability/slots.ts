// The pure slot computation behind GET /availability (no database, no clock of its own).
//
// For every local calendar day of [fromDay, toDay] in the tenant's time zone, the user's weekly
// working hours of that weekday (0 = Sunday … 6 = Saturday, "HH:MM" local, "24:00" = midnight at the
// end of the day) become real instants with luxon, so a DST change moves their UTC times. Intervals of
// one day that overlap or touch are merged. Each interval is cut into slots of `slotMinutes` real
// minutes aligned to the interval's start; a slot is kept when it lies entirely inside the interval,
// does not intersect any busy interval (half-open [start, end)) and does not start before `now`.
// Linear: the slots come in time order, so one sweep over the busy intervals sorted by start decides
// every slot (O(slots + busy · log busy), never slot × busy), and a caller that needs only the first
// free slot stops there (slotsOf is a generator).
import { DateTime } from "luxon";
import { clampInstant, MAX_INSTANT } from "../_lib/schemas.js";

export interface WorkingHoursEntry {
  weekday: number;
  start: string;
  end: string;
}

export interface Interval {
  startsAt: Date;
  endsAt: Date;
}

export interface SlotQuery {
  zone: string;
  /** YYYY-MM-DD, inclusive. */
  fromDay: string;
  /** YYYY-MM-DD, inclusive. */
  toDay: string;
  slotMinutes: number;
  workingHours: WorkingHoursEntry[];
  /** Scheduled appointments of the user (any that intersect the range). */
  busy: Interval[];
  now: Date;
}

const HHMM = /^(\d{2}):(\d{2})$/;

/** "HH:MM" → minutes after local midnight, or undefined when malformed (00:00 … 24:00). */
export function minutesOfDay(hhmm: string): number | undefined {
  const m = HHMM.exec(hhmm);
  if (!m) return undefined;
  const h = Number(m[1]);
  const min = Number(m[2]);
  if (min > 59 || h > 24 || (h === 24 && min !== 0)) return undefined;
  return h * 60 + min;
}

/** A calendar date "YYYY-MM-DD" at the start of that day in `zone`, or undefined when not a real date. */
export function startOfLocalDay(day: string, zone: string): DateTime | undefined {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(day)) return undefined;
  const dt = DateTime.fromISO(day, { zone });
  return dt.isValid ? dt.startOf("day") : undefined;
}

/** The local wall-clock time `minutes` after midnight of `day` as an instant (24:00 → next midnight). */
function atLocalMinutes(day: DateTime, minutes: number): DateTime {
  if (minutes >= 24 * 60) return day.plus({ days: 1 }).startOf("day");
  return day.set({ hour: Math.floor(minutes / 60), minute: minutes % 60, second: 0, millisecond: 0 });
}

/**
 * The instants [start, end) of the whole range: local midnight of fromDay to local midnight after
 * toDay, clamped to the storable instants (0001-01-01 in a zone east of UTC starts in year 0;
 * midnight after 9999-12-31 west of UTC is in year 10000).
 */
export function rangeBounds(fromDay: string, toDay: string, zone: string): Interval {
  const from = startOfLocalDay(fromDay, zone)!;
  const to = startOfLocalDay(toDay, zone)!.plus({ days: 1 }).startOf("day");
  return { startsAt: clampInstant(from.toJSDate()), endsAt: clampInstant(to.toJSDate()) };
}

/** Working intervals of the range as instants, merged per day, in time order. */
export function workingIntervals(q: Pick<SlotQuery, "zone" | "fromDay" | "toDay" | "workingHours">): Interval[] {
  const out: Interval[] = [];
  const last = startOfLocalDay(q.toDay, q.zone)!;
  for (let day = startOfLocalDay(q.fromDay, q.zone)!; day <= last; day = day.plus({ days: 1 }).startOf("day")) {
    const weekday = day.weekday % 7; // luxon: 1 = Monday … 7 = Sunday → 0 = Sunday
    const spans: Interval[] = [];
    for (const h of q.workingHours) {
      if (h.weekday !== weekday) continue;
      const s = minutesOfDay(h.start);
      const e = minutesOfDay(h.end);
      if (s === undefined || e === undefined || e <= s) continue;
      const startsAt = atLocalMinutes(day, s).toJSDate();
      const endsAt = atLocalMinutes(day, e).toJSDate();
      if (endsAt > startsAt) spans.push({ startsAt, endsAt });
    }
    spans.sort((a, b) => a.startsAt.getTime() - b.startsAt.getTime());
    const merged: Interval[] = [];
    for (const span of spans) {
      const prev = merged[merged.length - 1];
      if (prev && span.startsAt.getTime() <= prev.endsAt.getTime()) {
        if (span.endsAt > prev.endsAt) prev.endsAt = span.endsAt;
      } else merged.push({ ...span });
    }
    out.push(...merged);
  }
  return out;
}

/** The free slots, in time order. */
export function freeSlots(q: SlotQuery & { intervals?: Interval[] }): Interval[] {
  return [...slotsOf(q)];
}

/** The first free slot, or undefined: only as much of the range is looked at as needed. */
export function firstFreeSlot(q: SlotQuery & { intervals?: Interval[] }): Interval | undefined {
  for (const slot of slotsOf(q)) return slot;
  return undefined;
}

/**
 * The free slots in time order, lazily. `intervals` (workingIntervals of the query) may be passed in
 * when several users share the same weekly hours.
 */
export function* slotsOf(q: SlotQuery & { intervals?: Interval[] }): Generator<Interval> {
  const stepMs = q.slotMinutes * 60_000;
  if (!Number.isFinite(stepMs) || stepMs <= 0) return;
  const busy = q.busy.map((b) => ({ s: b.startsAt.getTime(), e: b.endsAt.getTime() })).sort((a, b) => a.s - b.s);
  const now = q.now.getTime();
  // Sweep: slots only move forward in time, so the busy intervals starting before a slot's end are
  // a growing prefix of `busy`; the slot is taken iff the latest end among them is after its start.
  let next = 0;
  let latestEnd = Number.NEGATIVE_INFINITY;
  for (const w of q.intervals ?? workingIntervals(q)) {
    const end = Math.min(w.endsAt.getTime(), MAX_INSTANT.getTime()); // a slot must end at a storable instant
    for (let s = w.startsAt.getTime(); s + stepMs <= end; s += stepMs) {
      const e = s + stepMs;
      while (next < busy.length && busy[next]!.s < e) latestEnd = Math.max(latestEnd, busy[next++]!.e);
      if (s < now || latestEnd > s) continue;
      yield { startsAt: new Date(s), endsAt: new Date(e) };
    }
  }
}
