// GET /public/v1/tickets — list tickets with their comments (tenant:tickets.read).
// Query (not strict: unknown parameters are ignored):
//   status      string; a value that is not a ticket status matches nothing (200, empty list)
//   assignedTo  uuid of a user; customerId uuid of a contact (malformed → 422; unknown/foreign → empty)
//   offset, limit (1–200, default 50)
// Newest first (createdAt desc, id desc); each ticket embeds its thread oldest first, loaded for the
// whole page in the same statement (never one query per ticket). The page is cut to the byte budget
// (routers/_lib/page-budget.ts) in that statement, before any thread is read: only the threads of the
// tickets returned are built.
import { z } from "zod";
import { Prisma } from "../../generated/prisma/client.js";
import { TicketObject } from "../../model/ticket.js";
import { budgetCut, cutToBudget, OFFSET_BUDGET_DOC, oversizedAllowed, ticketSize, withheld, type Cut } from "../_lib/page-budget.js";
import { Id, OffsetList, offsetList, PageQuery } from "../_lib/schemas.js";
import { eq, exactTotal, listStatement, splitList, whereOf, type Filter, type ListRows, listRows } from "../_lib/totals.js";
import { ExternalId } from "../_lib/sync.js";
import { scoped } from "../trpc.js";
import { fromThreadRow, isTicketStatus, selectTickets, type TicketThreadRow } from "./schemas.js";

export const ListTicketsInput = z.object({
  status: z.string().meta({ description: "open, pending, resolved or closed; any other value matches nothing" }).optional(),
  assignedTo: Id.meta({ description: "id of the assigned user" }).optional(),
  customerId: Id.meta({ description: "id of the linked contact" }).optional(),
  externalId: ExternalId.describe("Only the object with this external id (exact match; none → empty page)").optional(),
  ...PageQuery,
});

export const listTickets = scoped("tenant:tickets.read")
  .meta({
    openapi: {
      method: "GET",
      path: "/public/v1/tickets",
      tags: ["tickets"],
      summary: "List tickets",
      description:
        "Tickets of the tenant, newest first (createdAt, then id, descending), each with its comments oldest first. " +
        "Filters: `status`, `assignedTo`, `customerId`; an unknown or foreign value matches nothing. `limit` 1 to 200 " +
        "(default 50), `offset` default 0. " + OFFSET_BUDGET_DOC,
      protect: true,
    },
  })
  .input(ListTicketsInput)
  .output(OffsetList(TicketObject))
  .query(async ({ ctx, input }) => {
    const page = { offset: input.offset, limit: input.limit };
    if (input.status !== undefined && !isTicketStatus(input.status)) return offsetList([], 0, page);
    // One statement: the total (a counter for no filter or one filter, else an index count over the
    // most selective filter's index), the page and each ticket's thread (routers/_lib/totals.ts).
    const filters: Filter[] = [];
    if (input.status !== undefined) filters.push(eq(ctx.tenantId, "Ticket", "status", "status", input.status, "TicketStatus"));
    if (input.assignedTo !== undefined) filters.push(eq(ctx.tenantId, "Ticket", "assignedTo", "assignedToId", input.assignedTo, "uuid"));
    if (input.customerId !== undefined) filters.push(eq(ctx.tenantId, "Ticket", "customerId", "customerId", input.customerId, "uuid"));
    if (input.externalId !== undefined) filters.push({ cond: Prisma.sql`"externalId" = ${input.externalId}` });
    const where = whereOf(ctx.tenantId, filters);
    // Cut to the byte budget (routers/_lib/page-budget.ts): the threads of the tickets returned only.
    const read = (cut: Cut) => listRows<TicketThreadRow>(ctx,
      listStatement({
        tenantId: ctx.tenantId,
        offset: page.offset,
        total: exactTotal(ctx.tenantId, "Ticket", filters),
        seek: filters.length === 0 ? { entity: "Ticket", column: Prisma.sql`"createdAt"`, desc: true } : undefined,
        page: (at) =>
          selectTickets(
            ctx.tenantId,
            budgetCut(
              cut,
              Prisma.sql`SELECT * FROM "Ticket" WHERE ${where} AND ${at.where} ORDER BY "createdAt" DESC, "id" DESC
                          LIMIT ${page.limit} OFFSET ${at.offset}`,
              ticketSize(ctx.tenantId),
              Prisma.sql`"createdAt" DESC, "id" DESC`,
              { budget: ctx.pageBudget },
            ),
          ),
        order: Prisma.sql`p."createdAt" DESC, p."id" DESC`,
      }),
    );
    const { total: count, items } = splitList(await cutToBudget(read, (rows) => withheld(rows, page.offset)));
    const tickets = items.map(fromThreadRow);
    // A ticket larger than this call's share of a /trpc batch: one call of the batch may answer it.
    if (tickets.length === 1 && !oversizedAllowed(ctx, tickets[0])) return offsetList([], count, page);
    return offsetList(tickets, count, page);
  });
