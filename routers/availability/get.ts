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
import { DateTime, IANAZone } from "luxon";
import { z } from "zod";
import { notFound } from "../../server/errors.js";
import { Id } from "../_lib/schemas.js";
import { owned } from "../_lib/tenant.js";
import { scoped } from "../trpc.js";
import { AvailabilityObject, CalendarDate, MAX_RANGE_DAYS, type DegradedReason } from "./schemas.js";
import { freeSlots, rangeBounds, type Interval, type WorkingHoursEntry } from "./slots.js";

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
  slots: Interval[];
  appointments: number;
  hasWorkingHours: boolean;
}

export const getAvailability = scoped("tenant:appointments.read")
  .meta({
    errors: ["NOT_FOUND"],
    openapi: { method: "GET", path: "/public/v1/availability", tags: ["availability"], summary: "Free slots of one bookable user", protect: true },
  })
  .input(AvailabilityQuery)
  .output(AvailabilityObject)
  .query(async ({ ctx, input }) => {
    const db = ctx.db;
    let userIds: string[];
    if (input.userId) {
      const user = await db.user.findFirst({ where: owned(ctx, { id: input.userId }), select: { id: true, bookable: true } });
      // A user who may not be booked has no availability to offer: same 404 as an unknown one.
      if (!user || !user.bookable) throw notFound("User");
      userIds = [user.id];
    } else {
      const users = await db.user.findMany({ where: owned(ctx, { bookable: true }), select: { id: true }, orderBy: { id: "asc" } });
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
    const candidates: Candidate[] = userIds.map((userId) => {
      const workingHours: WorkingHoursEntry[] = hours.filter((h) => h.userId === userId);
      const mine = busy.filter((b) => b.assignedUserId === userId);
      return {
        userId,
        hasWorkingHours: workingHours.length > 0,
        appointments: mine.length,
        slots: freeSlots({
          zone,
          fromDay: input.from,
          toDay: input.to,
          slotMinutes: ctx.caller.tenant.slotMinutes,
          workingHours,
          busy: mine,
          now,
        }),
      };
    });

    const firstFree = (c: Candidate) => c.slots[0]?.startsAt.getTime() ?? Number.POSITIVE_INFINITY;
    candidates.sort(
      (a, b) =>
        firstFree(a) - firstFree(b) ||
        a.appointments - b.appointments ||
        (a.userId < b.userId ? -1 : a.userId > b.userId ? 1 : 0),
    );
    const chosen = candidates[0]!;

    const degradedReason: DegradedReason | null = !chosen.hasWorkingHours
      ? "no_working_hours"
      : !zoneOk
        ? "invalid_timezone"
        : null;
    return {
      slots: chosen.slots.map((s) => ({ startsAt: s.startsAt.toISOString(), endsAt: s.endsAt.toISOString(), userId: chosen.userId })),
      degraded: degradedReason !== null,
      degradedReason,
    };
  });
