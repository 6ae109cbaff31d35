// POST /public/v1/appointments — create an appointment (source "manual", status "scheduled").
// Rules, in order: scope → 422 (strict body, bounds, endsAt after startsAt) → 404 (every id in the
// body is the tenant's; the assigned user must be bookable) → 409 APPOINTMENT_OVERLAP (a live
// overlap; the exclusion constraint "Appointment_no_overlap" is the guard) → insert.
import { z } from "zod";
import { DateTimeInput, Id, Text } from "../_lib/schemas.js";
import { idempotent } from "../_lib/idempotent.js";
import { mustExist, owned } from "../_lib/tenant.js";
import { scoped } from "../trpc.js";
import { AppointmentObject, findOverlap, guardAppointmentWrite, lockUserCalendar, Notes, overlapError, toAppointment } from "./schemas.js";

export const CreateAppointmentInput = z
  .object({
    assignedUserId: Id,
    title: Text(255),
    appointmentType: Text(50),
    startsAt: DateTimeInput,
    endsAt: DateTimeInput,
    customerId: Id.optional(),
    conversationId: Id.optional(),
    leadId: Id.optional(),
    notes: Notes.nullable().optional(),
  })
  .strict()
  .refine((b) => !(b.startsAt instanceof Date && b.endsAt instanceof Date) || b.endsAt.getTime() > b.startsAt.getTime(), { path: ["endsAt"], message: "must be after startsAt" });

export const createAppointment = scoped("tenant:appointments.manage")
  .meta({
    errors: ["NOT_FOUND", "APPOINTMENT_OVERLAP"],
    openapi: { method: "POST", path: "/public/v1/appointments", tags: ["appointments"], summary: "Create an appointment", protect: true },
    successStatus: 201,
  })
  .input(CreateAppointmentInput)
  .output(AppointmentObject)
  .mutation(
    idempotent(async ({ ctx, input }) => {
      const db = ctx.db;
      // 404s: every id is resolved before anything is written.
      await mustExist(
        db.user.findFirst({ where: owned(ctx, { id: input.assignedUserId, bookable: true }), select: { id: true } }),
        "User",
      );
      if (input.customerId)
        await mustExist(db.contact.findFirst({ where: owned(ctx, { id: input.customerId, deletedAt: null }), select: { id: true } }), "Contact");
      if (input.conversationId)
        await mustExist(db.conversation.findFirst({ where: owned(ctx, { id: input.conversationId }), select: { id: true } }), "Conversation");
      if (input.leadId) await mustExist(db.lead.findFirst({ where: owned(ctx, { id: input.leadId }), select: { id: true } }), "Lead");

      // 409: a friendlier answer that names the blocker; the constraint below decides under races.
      // ctx.db is the idempotent() transaction: the lock lasts until it commits.
      await lockUserCalendar(db, ctx.tenantId, input.assignedUserId);
      const blocker = await findOverlap(db, {
        tenantId: ctx.tenantId,
        userId: input.assignedUserId,
        startsAt: input.startsAt,
        endsAt: input.endsAt,
      });
      if (blocker) throw overlapError({ conflictingAppointmentId: blocker.id });

      const now = ctx.services.now();
      const row = await guardAppointmentWrite(() =>
        db.appointment.create({
          data: {
            tenantId: ctx.tenantId,
            assignedUserId: input.assignedUserId,
            customerId: input.customerId ?? null,
            conversationId: input.conversationId ?? null,
            leadId: input.leadId ?? null,
            title: input.title,
            appointmentType: input.appointmentType,
            startsAt: input.startsAt,
            endsAt: input.endsAt,
            status: "scheduled",
            source: "manual",
            notes: input.notes ?? null,
            createdAt: now,
            updatedAt: now,
          },
        }),
      );
      return toAppointment(row);
    }),
  );
