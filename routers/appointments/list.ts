// GET /public/v1/appointments — the offset list, ordered by startsAt asc, then id asc.
// Filters: userId (the assigned user), customerId, leadId (UUIDs; unknown or foreign → empty list),
// status (raw value; a value that is not one of the four statuses → empty list), from/to
// (date-times: the appointments intersecting [from, to), i.e. endsAt > from and startsAt < to;
// either bound alone is allowed; from after to → 422).
import { z } from "zod";
import { Prisma } from "../../generated/prisma/client.js";
import { validation } from "../../server/errors.js";
import { Appointment, AppointmentObject, toAppointment, type AppointmentRow } from "../../model/appointment.js";
import {
  defineList,
  LIST_QUERY_DOC,
  ListEnvelopeExtras,
  ListQueryPieces,
  MATCHES_NOTHING,
  SortQuery,
} from "../_lib/list.js";
import { appointmentSize, OFFSET_BUDGET_DOC } from "../_lib/page-budget.js";
import { DateTimeInput, Id, OffsetList, PageQuery } from "../_lib/schemas.js";
import { sqlTime, type Filter } from "../_lib/totals.js";
import { scoped } from "../trpc.js";
import { isAppointmentStatus } from "./schemas.js";

const SORTS = ["createdAt", "updatedAt", "startsAt"] as const;

export const ListAppointmentsQuery = z.object({
  userId: Id.optional(),
  customerId: Id.optional(),
  leadId: Id.optional(),
  status: z.string().optional(),
  from: DateTimeInput.optional(),
  to: DateTimeInput.optional(),
  sort: SortQuery(SORTS, "startsAt"),
  ...ListQueryPieces,
  ...PageQuery,
});

/** The appointments list: by startsAt, then id. */
export const appointmentList = defineList<AppointmentRow, z.infer<typeof AppointmentObject>>({
  entity: "Appointment",
  order: { column: "startsAt", desc: false },
  sorts: SORTS,
  pick: Appointment.select(),
  size: () => appointmentSize(),
  toPublic: toAppointment,
});

export const listAppointments = scoped("tenant:appointments.read")
  .meta({
    openapi: {
      method: "GET",
      path: "/public/v1/appointments",
      tags: ["appointments"],
      summary: "List appointments",
      description: `Ordered by startsAt, then id (by default). ${LIST_QUERY_DOC} ${OFFSET_BUDGET_DOC}`,
      protect: true,
    },
  })
  .input(ListAppointmentsQuery)
  .output(OffsetList(AppointmentObject).extend(ListEnvelopeExtras))
  .query(async ({ ctx, input }) => {
    if (input.from && input.to && input.from.getTime() > input.to.getTime())
      throw validation("from must not be after to", {
        fields: [{ field: "to", code: "invalid_range", message: "must not be before from" }],
      });
    // One statement (routers/_lib/list.ts): the total and the page.
    const filters: Filter[] = [];
    if (input.userId) filters.push(appointmentList.eq(ctx.tenantId, "assignedUserId", input.userId, "uuid"));
    if (input.customerId) filters.push(appointmentList.eq(ctx.tenantId, "customerId", input.customerId, "uuid"));
    if (input.leadId) filters.push(appointmentList.eq(ctx.tenantId, "leadId", input.leadId, "uuid"));
    // A status that no appointment can have matches nothing (common rule 2).
    if (input.status !== undefined)
      filters.push(
        isAppointmentStatus(input.status)
          ? appointmentList.eq(ctx.tenantId, "status", input.status, "AppointmentStatus")
          : MATCHES_NOTHING,
      );
    if (input.from !== undefined || input.to !== undefined) {
      const t = (d?: Date) => (d ? sqlTime(d) : Prisma.sql`NULL::timestamptz`);
      const exact = [
        ...(input.from ? [Prisma.sql`"endsAt" > ${sqlTime(input.from)}`] : []),
        ...(input.to ? [Prisma.sql`"startsAt" < ${sqlTime(input.to)}`] : []),
      ];
      // The overlap (&&) with the closed range is what the GiST index answers; the exact rule follows.
      filters.push({
        cond: Prisma.sql`tstzrange("startsAt", "endsAt", '[)') && tstzrange(${t(input.from)}, ${t(input.to)}, '[]') AND ${Prisma.join(exact, " AND ")}`,
      });
    }
    return (await appointmentList.page(ctx, input, { filters })).page;
  });
