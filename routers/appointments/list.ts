// GET /public/v1/appointments — the offset list, ordered by startsAt asc, then id asc.
// Filters: userId (the assigned user), customerId, leadId (UUIDs; unknown or foreign → empty list),
// status (raw value; a value that is not one of the four statuses → empty list), from/to
// (date-times: the appointments intersecting [from, to), i.e. endsAt > from and startsAt < to;
// either bound alone is allowed; from after to → 422).
import { z } from "zod";
import { Prisma } from "../../generated/prisma/client.js";
import { validation } from "../../server/errors.js";
import { Appointment, AppointmentObject, toAppointment, type AppointmentRow } from "../../model/appointment.js";
import { appointmentSize, budgetCut, cutToBudget, OFFSET_BUDGET_DOC, withheld, type Cut } from "../_lib/page-budget.js";
import { DateTimeInput, Id, OffsetList, offsetList, PageQuery } from "../_lib/schemas.js";
import { eq, exactTotal, listStatement, splitList, sqlTime, whereOf, type Filter, type ListRows, listRows } from "../_lib/totals.js";
import { scoped } from "../trpc.js";
import { isAppointmentStatus } from "./schemas.js";

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
    openapi: {
      method: "GET",
      path: "/public/v1/appointments",
      tags: ["appointments"],
      summary: "List appointments",
      description: `Ordered by startsAt, then id. ${OFFSET_BUDGET_DOC}`,
      protect: true,
    },
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

    // One statement: the total (a counter for no filter or one equality filter, else an index count),
    // and the page; a deep offset of the unfiltered list starts at the startsAt day bucket holding it.
    const filters: Filter[] = [];
    if (input.userId) filters.push(eq(ctx.tenantId, "Appointment", "userId", "assignedUserId", input.userId, "uuid"));
    if (input.customerId) filters.push(eq(ctx.tenantId, "Appointment", "customerId", "customerId", input.customerId, "uuid"));
    if (input.leadId) filters.push(eq(ctx.tenantId, "Appointment", "leadId", "leadId", input.leadId, "uuid"));
    if (input.status !== undefined) filters.push(eq(ctx.tenantId, "Appointment", "status", "status", input.status, "AppointmentStatus"));
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
    const where = whereOf(ctx.tenantId, filters);
    const read = (cut: Cut) => listRows<AppointmentRow>(ctx,
      listStatement({
        tenantId: ctx.tenantId,
        offset: input.offset,
        total: exactTotal(ctx.tenantId, "Appointment", filters),
        seek: filters.length === 0 ? { entity: "Appointment", column: Prisma.sql`"startsAt"`, desc: false } : undefined,
        // Cut to the byte budget (routers/_lib/page-budget.ts) in the same statement.
        page: (at) =>
          budgetCut(
            cut,
            Prisma.sql`
              SELECT ${Appointment.select()} FROM "Appointment" WHERE ${where} AND ${at.where} ORDER BY "startsAt", "id" LIMIT ${input.limit} OFFSET ${at.offset}`,
            appointmentSize(),
            Prisma.sql`"startsAt", "id"`,
            { budget: ctx.pageBudget },
          ),
        order: Prisma.sql`p."startsAt", p."id"`,
      }),
    );
    const { total: count, items } = splitList(await cutToBudget(read, (rows) => withheld(rows, page.offset)));
    return offsetList(items.map(toAppointment), count, page);
  });
