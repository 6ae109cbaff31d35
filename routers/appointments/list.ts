// GET /public/v1/appointments — the offset list, ordered by startsAt asc, then id asc.
// Filters: userId (the assigned user), customerId, leadId (UUIDs; unknown or foreign → empty list),
// status (raw value; a value that is not one of the four statuses → empty list), from/to
// (date-times: the appointments intersecting [from, to), i.e. endsAt > from and startsAt < to;
// either bound alone is allowed; from after to → 422).
import { z } from "zod";
import type { Prisma } from "../../generated/prisma/client.js";
import { validation } from "../../server/errors.js";
import { DateTimeInput, Id, OffsetList, offsetList, PageQuery } from "../_lib/schemas.js";
import { owned } from "../_lib/tenant.js";
import { scoped } from "../trpc.js";
import { AppointmentObject, isAppointmentStatus, toAppointment } from "./schemas.js";

export const ListAppointmentsQuery = z.object({
  userId: Id.optional(),
  customerId: Id.optional(),
  leadId: Id.optional(),
  status: z.string().optional(),
  from: DateTimeInput.optional(),
  to: DateTimeInput.optional(),
  ...PageQuery,
});

export const listAppointments = scoped("tenant:appointments.read")
  .meta({
    openapi: { method: "GET", path: "/public/v1/appointments", tags: ["appointments"], summary: "List appointments", protect: true },
  })
  .input(ListAppointmentsQuery)
  .output(OffsetList(AppointmentObject))
  .query(async ({ ctx, input }) => {
    const page = { offset: input.offset, limit: input.limit };
    if (input.from && input.to && input.from.getTime() > input.to.getTime())
      throw validation("from must not be after to", {
        fields: [{ field: "to", code: "invalid_range", message: "must not be before from" }],
      });
    // A status that no appointment can have matches nothing (common rule 2), without a query.
    if (input.status !== undefined && !isAppointmentStatus(input.status)) return offsetList([], 0, page);

    const where: Prisma.AppointmentWhereInput = owned(ctx, {
      ...(input.userId ? { assignedUserId: input.userId } : {}),
      ...(input.customerId ? { customerId: input.customerId } : {}),
      ...(input.leadId ? { leadId: input.leadId } : {}),
      ...(input.status !== undefined && isAppointmentStatus(input.status) ? { status: input.status } : {}),
      ...(input.from ? { endsAt: { gt: input.from } } : {}),
      ...(input.to ? { startsAt: { lt: input.to } } : {}),
    });
    const [rows, total] = await Promise.all([
      ctx.db.appointment.findMany({
        where,
        orderBy: [{ startsAt: "asc" }, { id: "asc" }],
        skip: input.offset,
        take: input.limit,
      }),
      ctx.db.appointment.count({ where }),
    ]);
    return offsetList(rows.map(toAppointment), total, page);
  });
