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
import { TicketObject } from "../../model/ticket.js";
import { OFFSET_BUDGET_DOC, ticketSize } from "../_lib/page-budget.js";
import {
  defineList,
  ExternalIds,
  LIST_QUERY_DOC,
  ListEnvelopeExtras,
  ListQueryPieces,
  MATCHES_NOTHING,
  SortQuery,
} from "../_lib/list.js";
import { Id, OffsetList, PageQuery } from "../_lib/schemas.js";
import type { Filter } from "../_lib/totals.js";
import { scoped } from "../trpc.js";
import { fromThreadRow, isTicketStatus, selectTickets, type TicketThreadRow } from "./schemas.js";

const SORTS = ["createdAt", "updatedAt"] as const;

/** The tickets list: newest first, each with its thread (read for the page's tickets within the budget). */
export const ticketList = defineList<TicketThreadRow, TicketObject>({
  entity: "Ticket",
  order: { column: "createdAt", desc: true },
  sorts: SORTS,
  externalId: true,
  finish: selectTickets,
  size: (t) => ticketSize(t),
  toPublic: fromThreadRow,
});

export const ListTicketsInput = z.object({
  status: z
    .string()
    .meta({ description: "open, pending, resolved or closed; any other value matches nothing" })
    .optional(),
  assignedTo: Id.meta({ description: "id of the assigned user" }).optional(),
  customerId: Id.meta({ description: "id of the linked contact" }).optional(),
  externalId: ExternalIds,
  sort: SortQuery(SORTS, "-createdAt"),
  ...ListQueryPieces,
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
        `(default 50), \`offset\` default 0. ${LIST_QUERY_DOC} ${OFFSET_BUDGET_DOC}`,
      protect: true,
    },
  })
  .input(ListTicketsInput)
  .output(OffsetList(TicketObject).extend(ListEnvelopeExtras))
  .query(async ({ ctx, input }) => {
    // One statement (routers/_lib/list.ts): the total, the page and each ticket's thread — built only
    // for the tickets within the byte budget. A status no ticket can have matches nothing.
    const filters: Filter[] = [];
    if (input.status !== undefined)
      filters.push(
        isTicketStatus(input.status)
          ? ticketList.eq(ctx.tenantId, "status", input.status, "TicketStatus")
          : MATCHES_NOTHING,
      );
    if (input.assignedTo !== undefined)
      filters.push(ticketList.eq(ctx.tenantId, "assignedToId", input.assignedTo, "uuid"));
    if (input.customerId !== undefined)
      filters.push(ticketList.eq(ctx.tenantId, "customerId", input.customerId, "uuid"));
    return (await ticketList.page(ctx, input, { filters })).page;
  });
