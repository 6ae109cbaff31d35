// GET /public/v1/tickets — list tickets with their comments (tenant:tickets.read).
// Query (not strict: unknown parameters are ignored):
//   status      string; a value that is not a ticket status matches nothing (200, empty list)
//   assignedTo  uuid of a user; customerId uuid of a contact (malformed → 422; unknown/foreign → empty)
//   offset, limit (1–200, default 50)
// Newest first (createdAt desc, id desc); each ticket embeds its thread oldest first, loaded for the
// whole page in one batched query (never one per ticket).
import { z } from "zod";
import { Id, OffsetList, offsetList, PageQuery } from "../_lib/schemas.js";
import { owned } from "../_lib/tenant.js";
import { scoped } from "../trpc.js";
import { isTicketStatus, TicketObject, toTicket, withComments } from "./schemas.js";

export const ListTicketsInput = z.object({
  status: z.string().meta({ description: "open, pending, resolved or closed; any other value matches nothing" }).optional(),
  assignedTo: Id.meta({ description: "id of the assigned user" }).optional(),
  customerId: Id.meta({ description: "id of the linked contact" }).optional(),
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
        "(default 50), `offset` default 0.",
      protect: true,
    },
  })
  .input(ListTicketsInput)
  .output(OffsetList(TicketObject))
  .query(async ({ ctx, input }) => {
    const page = { offset: input.offset, limit: input.limit };
    if (input.status !== undefined && !isTicketStatus(input.status)) return offsetList([], 0, page);
    const where = owned(ctx, {
      ...(input.status !== undefined && { status: input.status }),
      ...(input.assignedTo !== undefined && { assignedToId: input.assignedTo }),
      ...(input.customerId !== undefined && { customerId: input.customerId }),
    });
    // The count and the page (with its comments) run side by side: one round trip of latency less.
    const [total, rows] = await Promise.all([
      ctx.db.ticket.count({ where }),
      ctx.db.ticket.findMany({
        where,
        orderBy: [{ createdAt: "desc" }, { id: "desc" }],
        skip: page.offset,
        take: page.limit,
        include: withComments,
      }),
    ]);
    return offsetList(rows.map(toTicket), total, page);
  });
