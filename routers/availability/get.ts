// GET /public/v1/availability — the free slots of one bookable user over whole local days.
// Rules, in order: scope → 422 (from/to real YYYY-MM-DD dates, from ≤ to, at most 31 days
// inclusive; userId a UUID) → 404 (userId unknown, foreign or not bookable; without userId: nobody
// in the tenant is bookable) → the slots.
// Range: local midnight of `from` to local midnight after `to`, in the tenant's time zone.
// Slots: slotMinutes long, aligned to the working-hours start, entirely inside the weekly working
// hours, not intersecting a scheduled appointment of the user, never starting before now.
// Without userId the chosen user is the bookable user with the earliest free slot in the range;
// ties (and the case where nobody has a free slot) by fewest scheduled appointments intersecting
// the range, then by id ascending.
// Work is linear in users + working hours + appointments + slots: rows are grouped by user once,
// users with the same weekly hours share one computation of their working intervals, each user is
// swept only up to their first free slot, and only the chosen user's slots are listed.
import { DateTime, IANAZone } from "luxon";
import { z } from "zod";
import { notFound } from "../../server/errors.js";
import { Id } from "../_lib/schemas.js";
import { owned } from "../_lib/tenant.js";
import { scoped } from "../trpc.js";
import { AvailabilityObject, CalendarDate, MAX_RANGE_DAYS, type DegradedReason } from "./schemas.js";
import {
  firstFreeSlot,
  freeSlots,
  rangeBounds,
  workingIntervals,
  type Interval,
  type WorkingHoursEntry,
} from "./slots.js";

export const AvailabilityQuery = z
  .object({
    from: CalendarDate,
    to: CalendarDate,
    userId: Id.optional(),
  })
  .superRefine((q, ctx) => {
    const from = DateTime.fromISO(q.from, { zone: "utc" });
    const to = DateTime.fromISO(q.to, { zone: "utc" });
    // zod runs this even when a field failed above: only compare two real dates.
    if (!from.isValid || !to.isValid) return;
    if (to < from) ctx.addIssue({ code: "custom", path: ["to"], message: "must not be before from" });
    else if (to.diff(from, "days").days + 1 > MAX_RANGE_DAYS)
      ctx.addIssue({ code: "custom", path: ["to"], message: `the range may span at most ${MAX_RANGE_DAYS} days` });
  });

interface Candidate {
  userId: string;
  intervals: Interval[];
  busy: Interval[];
  firstFree: number;
  hasWorkingHours: boolean;
}

/** Rows grouped by their user id, in one pass. */
function byUser<T>(rows: T[], userOf: (row: T) => string): Map<string, T[]> {
  const out = new Map<string, T[]>();
  for (const row of rows) {
    const key = userOf(row);
    const list = out.get(key);
    if (list) list.push(row);
    else out.set(key, [row]);
  }
  return out;
}

export const getAvailability = scoped("tenant:appointments.read")
  .meta({
    errors: ["NOT_FOUND"],
    openapi: {
      method: "GET",
      path: "/public/v1/availability",
      tags: ["availability"],
      summary: "Free slots of one bookable user",
      protect: true,
    },
  })
  .input(AvailabilityQuery)
  .output(AvailabilityObject)
  .query(async ({ ctx, input }) => {
    const db = ctx.db;
    let userIds: string[];
    if (input.userId) {
      const user = await db.user.findFirst({
        where: owned(ctx, { id: input.userId }),
        select: { id: true, bookable: true },
      });
      // A user who may not be booked has no availability to offer: same 404 as an unknown one.
      if (!user?.bookable) throw notFound("User");
      userIds = [user.id];
    } else {
      const users = await db.user.findMany({
        where: owned(ctx, { bookable: true }),
        select: { id: true },
        orderBy: { id: "asc" },
      });
      if (users.length === 0) throw notFound("Bookable user");
      userIds = users.map((u) => u.id);
    }

    const configured = ctx.caller.tenant.timezone;
    const zoneOk = IANAZone.isValidZone(configured);
    const zone = zoneOk ? configured : "UTC";
    const range = rangeBounds(input.from, input.to, zone);

    const [hours, busy] = await Promise.all([
      db.workingHours.findMany({
        where: owned(ctx, { userId: { in: userIds } }),
        select: { userId: true, weekday: true, start: true, end: true },
      }),
      db.appointment.findMany({
        where: owned(ctx, {
          assignedUserId: { in: userIds },
          status: "scheduled" as const,
          startsAt: { lt: range.endsAt },
          endsAt: { gt: range.startsAt },
        }),
        select: { assignedUserId: true, startsAt: true, endsAt: true },
      }),
    ]);

    const now = ctx.services.now();
    const slotMinutes = ctx.caller.tenant.slotMinutes;
    const hoursOf = byUser(hours, (h) => h.userId);
    const busyOf = byUser(busy, (b) => b.assignedUserId);
    // Working intervals depend only on the weekly hours: computed once per distinct schedule.
    const intervalsBySchedule = new Map<string, Interval[]>();
    const intervalsOf = (workingHours: WorkingHoursEntry[]) => {
      const schedule = JSON.stringify(workingHours.map((h) => [h.weekday, h.start, h.end]).sort());
      let intervals = intervalsBySchedule.get(schedule);
      if (!intervals) {
        intervals = workingIntervals({ zone, fromDay: input.from, toDay: input.to, workingHours });
        intervalsBySchedule.set(schedule, intervals);
      }
      return intervals;
    };
    const candidates: Candidate[] = userIds.map((userId) => {
      const workingHours: WorkingHoursEntry[] = hoursOf.get(userId) ?? [];
      const mine = busyOf.get(userId) ?? [];
      const intervals = intervalsOf(workingHours);
      const first = firstFreeSlot({
        zone,
        fromDay: input.from,
        toDay: input.to,
        slotMinutes,
        workingHours,
        busy: mine,
        now,
        intervals,
      });
      return {
        userId,
        intervals,
        busy: mine,
        hasWorkingHours: workingHours.length > 0,
        firstFree: first?.startsAt.getTime() ?? Number.POSITIVE_INFINITY,
      };
    });

    candidates.sort(
      (a, b) =>
        a.firstFree - b.firstFree ||
        a.busy.length - b.busy.length ||
        (a.userId < b.userId ? -1 : a.userId > b.userId ? 1 : 0),
    );
    const chosen = candidates[0]!;
    const slots = freeSlots({
      zone,
      fromDay: input.from,
      toDay: input.to,
      slotMinutes,
      workingHours: hoursOf.get(chosen.userId) ?? [],
      busy: chosen.busy,
      now,
      intervals: chosen.intervals,
    });

    const degradedReason: DegradedReason | null = !chosen.hasWorkingHours
      ? "no_working_hours"
      : !zoneOk
        ? "invalid_timezone"
        : null;
    return {
      slots: slots.map((s) => ({
        startsAt: s.startsAt.toISOString(),
        endsAt: s.endsAt.toISOString(),
        userId: chosen.userId,
      })),
      degraded: degradedReason !== null,
      degradedReason,
    };
  });
