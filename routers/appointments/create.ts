// POST /public/v1/appointments — create an appointment (source "manual", status "scheduled").
// Rules, in order: scope → 422 (strict body, bounds, endsAt after startsAt) → 404 (every id in the
// body is the tenant's; the assigned user must be bookable) → 409 APPOINTMENT_OVERLAP (a live
// overlap; the exclusion constraint "Appointment_no_overlap" is the guard) → insert. A success is one
// statement (calendar lock + checks + Idempotency-Key claim + row, routers/_lib/idempotent.ts `plan`).
import { randomUUID } from "node:crypto";
import { z } from "zod";
import { Prisma } from "../../generated/prisma/client.js";
import { insertRow } from "../../server/db/insert.js";
import { AppointmentObject, toAppointment, type AppointmentRow } from "../../model/appointment.js";
import { DateTimeInput, Id, Text } from "../_lib/schemas.js";
import { idempotent, type OneStatement } from "../_lib/idempotent.js";
import { mustExist, owned } from "../_lib/tenant.js";
import { scoped, type AuthedContext } from "../trpc.js";
import {
  calendarLockSql,
  findOverlap,
  guardAppointmentWrite,
  lockUserCalendar,
  Notes,
  overlapSql,
  overlapError,
} from "./schemas.js";
import type { StoredRow } from "../../model/row.js";

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
  .refine(
    (b) => !(b.startsAt instanceof Date && b.endsAt instanceof Date) || b.endsAt.getTime() > b.startsAt.getTime(),
    { path: ["endsAt"], message: "must be after startsAt" },
  );

type Input = z.output<typeof CreateAppointmentInput>;

/** The appointment row of this request (no read, no write): both paths insert exactly this row. */
function appointmentRow(ctx: AuthedContext, input: Input) {
  const now = ctx.services.now();
  return {
    id: randomUUID(),
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
    version: 1,
    createdAt: now,
    updatedAt: now,
  } satisfies StoredRow<AppointmentRow>; // every column of the row (model/appointment.ts)
}

/**
 * The one-statement create: the calendar lock first (a CTE every check below depends on), then the
 * conditions under which the transactional path would insert — every id is the tenant's (the user
 * bookable, the contact live) and no scheduled appointment of the user overlaps — as the gate. When
 * it does not hold (or the exclusion constraint refuses a row that committed after this statement's
 * snapshot), nothing is written and the transactional path answers the precise 404/409.
 */
function planAppointment(ctx: AuthedContext, input: Input): OneStatement<AppointmentObject> {
  const row = appointmentRow(ctx, input);
  const t = ctx.tenantId;
  const customer = row.customerId;
  const conversation = row.conversationId;
  const lead = row.leadId;
  return {
    table: "Appointment",
    row,
    body: toAppointment(row),
    // Only the checks of the ids this body names are in the statement (an absent id checks nothing).
    with: Prisma.sql`"calendar" AS (${calendarLockSql(t, row.assignedUserId)}),
      "admitted" AS (
        SELECT 1 FROM "calendar" l
         WHERE EXISTS (SELECT 1 FROM "User" u WHERE u."tenantId" = ${t}::uuid AND u."id" = ${row.assignedUserId}::uuid AND u."bookable" AND l."locked" = 1)
           ${customer ? Prisma.sql`AND EXISTS (SELECT 1 FROM "Contact" c WHERE c."tenantId" = ${t}::uuid AND c."id" = ${customer}::uuid AND c."deletedAt" IS NULL)` : Prisma.empty}
           ${conversation ? Prisma.sql`AND EXISTS (SELECT 1 FROM "Conversation" v WHERE v."tenantId" = ${t}::uuid AND v."id" = ${conversation}::uuid)` : Prisma.empty}
           ${lead ? Prisma.sql`AND EXISTS (SELECT 1 FROM "Lead" d WHERE d."tenantId" = ${t}::uuid AND d."id" = ${lead}::uuid)` : Prisma.empty}
           AND NOT EXISTS (SELECT 1 FROM "Appointment" a WHERE ${overlapSql(t, row.assignedUserId, input.startsAt, input.endsAt)} AND l."locked" = 1))`,
    gate: Prisma.sql`EXISTS (SELECT 1 FROM "admitted")`,
  };
}

export const createAppointment = scoped("tenant:appointments.manage")
  .meta({
    errors: ["NOT_FOUND", "APPOINTMENT_OVERLAP"],
    openapi: {
      method: "POST",
      path: "/public/v1/appointments",
      tags: ["appointments"],
      summary: "Create an appointment",
      protect: true,
    },
    successStatus: 201,
    location: "/public/v1/appointments/{id}",
  })
  .input(CreateAppointmentInput)
  .output(AppointmentObject)
  .mutation(
    idempotent(
      // The transactional path: it reports every refusal (404, 409 naming the blocker) and answers
      // replays, mismatches and expired keys; the one-statement plan runs first and writes successes.
      async ({ ctx, input }: { ctx: AuthedContext; input: Input }) => {
        const db = ctx.db;
        // 404s: every id is resolved before anything is written.
        await mustExist(
          db.user.findFirst({ where: owned(ctx, { id: input.assignedUserId, bookable: true }), select: { id: true } }),
          "User",
        );
        if (input.customerId)
          await mustExist(
            db.contact.findFirst({
              where: owned(ctx, { id: input.customerId, deletedAt: null }),
              select: { id: true },
            }),
            "Contact",
          );
        if (input.conversationId)
          await mustExist(
            db.conversation.findFirst({ where: owned(ctx, { id: input.conversationId }), select: { id: true } }),
            "Conversation",
          );
        if (input.leadId)
          await mustExist(db.lead.findFirst({ where: owned(ctx, { id: input.leadId }), select: { id: true } }), "Lead");

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

        const row = appointmentRow(ctx, input);
        await guardAppointmentWrite(() => insertRow(db, { table: "Appointment", row }));
        return toAppointment(row);
      },
      { plan: async ({ ctx, input }) => planAppointment(ctx, input) },
    ),
  );
