// PATCH /public/v1/appointments/{appointment_id} — partial update: status (any → any of the four
// values), reschedule (startsAt and/or endsAt), notes (string or null).
// Rules, in order: scope → 422 (strict body; a given pair must be ordered) → 404 (unknown or
// foreign appointment, no change) → 422 (the resulting pair, with the stored half, must be ordered)
// → 409 APPOINTMENT_OVERLAP when the result is scheduled and intersects another scheduled
// appointment of the same user (no change; the exclusion constraint is the guard) → write.
// An empty body returns the object unchanged (updatedAt untouched); any write advances updatedAt.
// If-Match (routers/_lib/sync.ts): checked after the 404 against the version re-read under the
// calendar lock, the UPDATE guarded by it → 412 PRECONDITION_FAILED, nothing written.
import { z } from "zod";
import { transaction } from "../../server/db/transaction.js";
import { AppointmentObject, AppointmentStatus, toAppointment } from "../../model/appointment.js";
import { DateTimeInput, Id } from "../_lib/schemas.js";
import { mustExist, owned } from "../_lib/tenant.js";
import { checkVersion, missedWrite, preconditionOf, versionGuard } from "../_lib/sync.js";
import { scoped } from "../trpc.js";
import { findOverlap, guardAppointmentWrite, lockUserCalendar, Notes, orderError, overlapError } from "./schemas.js";

export const UpdateAppointmentInput = z
  .object({
    appointment_id: Id,
    status: AppointmentStatus.optional(),
    startsAt: DateTimeInput.optional(),
    endsAt: DateTimeInput.optional(),
    notes: Notes.nullable().optional(),
  })
  .strict()
  .refine(
    (b) => !(b.startsAt instanceof Date && b.endsAt instanceof Date) || b.endsAt.getTime() > b.startsAt.getTime(),
    {
      path: ["endsAt"],
      message: "must be after startsAt",
    },
  );

export const updateAppointment = scoped("tenant:appointments.manage")
  .meta({
    errors: ["NOT_FOUND", "APPOINTMENT_OVERLAP", "PRECONDITION_FAILED"],
    openapi: {
      method: "PATCH",
      path: "/public/v1/appointments/{appointment_id}",
      tags: ["appointments"],
      summary: "Update, reschedule, cancel, complete or mark an appointment as no-show",
      description:
        "Partial update of status, startsAt/endsAt and notes (null clears). Accepts `If-Match`: when it names no current version, " +
        "412 PRECONDITION_FAILED with the current `ETag`, and nothing is written.",
      protect: true,
    },
  })
  .input(UpdateAppointmentInput)
  .output(AppointmentObject)
  .mutation(async ({ ctx, input }) => {
    const { appointment_id: id, ...changes } = input;
    const pre = preconditionOf(ctx);
    const found = await mustExist(ctx.db.appointment.findFirst({ where: owned(ctx, { id }) }), "Appointment");
    const given = Object.values(changes).some((v) => v !== undefined);
    if (!given) {
      checkVersion(pre, found.version);
      return toAppointment(found);
    }

    // One transaction per write, holding the assigned user's calendar lock (see lockUserCalendar);
    // run again as a whole if PostgreSQL picks it as a deadlock victim (server/db/transaction.ts).
    const row = await transaction(ctx.database.prisma, async (tx) => {
      await lockUserCalendar(tx, ctx.tenantId, found.assignedUserId);
      // Re-read under the lock: a concurrent PATCH may have moved it meanwhile.
      const current = await mustExist(tx.appointment.findFirst({ where: owned(ctx, { id }) }), "Appointment");
      checkVersion(pre, current.version);

      const startsAt = changes.startsAt ?? current.startsAt;
      const endsAt = changes.endsAt ?? current.endsAt;
      if (endsAt.getTime() <= startsAt.getTime()) throw orderError();
      const status = changes.status ?? current.status;

      const rescheduled =
        startsAt.getTime() !== current.startsAt.getTime() || endsAt.getTime() !== current.endsAt.getTime();
      const becomesScheduled = current.status !== "scheduled" && status === "scheduled";
      if (status === "scheduled" && (rescheduled || becomesScheduled)) {
        const blocker = await findOverlap(tx, {
          tenantId: ctx.tenantId,
          userId: current.assignedUserId,
          startsAt,
          endsAt,
          exceptId: current.id,
        });
        if (blocker) throw overlapError({ conflictingAppointmentId: blocker.id });
      }

      // updatedAt strictly advances, even when two writes land within one millisecond of the clock.
      const updatedAt = new Date(Math.max(ctx.services.now().getTime(), current.updatedAt.getTime() + 1));
      const rows = await guardAppointmentWrite(() =>
        tx.appointment.updateManyAndReturn({
          where: owned(ctx, { id, ...versionGuard(pre, current.version) }),
          data: {
            status,
            startsAt,
            endsAt,
            ...(changes.notes !== undefined ? { notes: changes.notes } : {}),
            updatedAt,
          },
        }),
      );
      return rows[0] ?? missedWrite(tx.appointment.findFirst({ where: owned(ctx, { id }) }), "Appointment");
    });
    return toAppointment(row);
  });
