// PUT /public/v1/tickets/by-external-id/{externalId} — create or update the ticket holding an
// external id (scope tenant:tickets.manage; routers/_lib/upsert.ts for the mechanism).
//   body: POST /tickets's body without externalId and without comment (comments have their own
//   endpoint). No ticket holds it → created as POST creates it (201, Location). One holds it →
//   subject and assignedTo (null unassigns) applied as PATCH applies them (200); customerId, leadId
//   and conversationId must be absent or equal to the stored values, else 422 naming them; nothing
//   differs → 200, nothing written.
import type { z } from "zod";
import { TicketObject } from "../../model/ticket.js";
import { checkVersion } from "../_lib/sync.js";
import { owned } from "../_lib/tenant.js";
import {
  differingCreateOnly,
  mayNotChange,
  PathExternalId,
  putMeta,
  putResolver,
  storedId,
  type UpsertResource,
} from "../_lib/upsert.js";
import { scoped, type AuthedContext } from "../trpc.js";
import { atLeastOneLink, insertTicket, TicketFields } from "./create.js";
import { TICKET_WRITES } from "./model.js";
import { mustBeAssignable, presentTickets, ticketRecord } from "./schemas.js";
import { writeTicket } from "./update.js";

const TicketUpsertFields = TicketFields.omit({ externalId: true, comment: true });
type Body = z.output<typeof TicketUpsertFields>;
export const TicketUpsertItem = TicketUpsertFields.extend(PathExternalId).superRefine(atLeastOneLink);
type Stored = Awaited<ReturnType<typeof findTickets>>[number];

// The tickets' own columns: whether one is created, updated or unchanged never needs its thread.
const findTickets = (ctx: AuthedContext, externalIds: string[]) =>
  ctx.db.ticket.findMany({ where: owned(ctx, { externalId: { in: externalIds } }) });

/**
 * A write gives the ticket's id; the answer's tickets are read last, with their threads, for the
 * results within the budget alone (presentTickets), and kept by a record as columns and a length.
 */
export const ticketUpserts: UpsertResource<Body, Stored, { id: string }, TicketObject> = {
  table: "Ticket",
  plural: "tickets",
  item: TicketUpsertItem,
  find: findTickets,
  create: async (ctx, body, externalId) => ({ id: (await insertTicket(ctx, { ...body, externalId })).id }),
  async update(ctx, ticket, body, pre) {
    const differs = differingCreateOnly(TICKET_WRITES.createOnly, ctx, ticket, body);
    if (typeof body.assignedTo === "string" && storedId(body.assignedTo) !== ticket.assignedToId)
      await mustBeAssignable(ctx, body.assignedTo);
    if (differs.length) throw mayNotChange(differs);
    checkVersion(pre, ticket.version);
    const changes = {
      ...(body.subject !== ticket.subject ? { subject: body.subject } : {}),
      ...(body.assignedTo !== undefined && storedId(body.assignedTo) !== ticket.assignedToId
        ? { assignedTo: storedId(body.assignedTo) }
        : {}),
    };
    if (Object.keys(changes).length === 0) return null;
    return { id: (await writeTicket(ctx, ticket, changes, pre)).id };
  },
  toPublic: (row) => ({ id: row.id }),
  present: (ctx, items, budget) =>
    presentTickets(
      ctx,
      items.map((i) => i.id),
      budget,
    ),
  record: ticketRecord,
};

export const upsertTicket = scoped("tenant:tickets.manage")
  .meta({
    errors: ["NOT_FOUND", "ALREADY_EXISTS", "PRECONDITION_FAILED"],
    upsert: true,
    location: "/public/v1/tickets/{id}",
    openapi: putMeta({
      plural: "tickets",
      tag: "tickets",
      summary: "Create or update a ticket by your external id",
      description:
        "The body is POST /tickets's without `externalId` (the path holds it, URL-encoded) and without `comment` (comments go through " +
        "POST /tickets/{ticket_id}/comments). No ticket holds the external id: the ticket is created exactly as POST creates it (201, " +
        "`Location`). One does: `subject` and `assignedTo` (null unassigns) are applied as PATCH applies them (200); `customerId`, `leadId` " +
        "and `conversationId` must be absent or equal to the stored values, else 422 naming them, with nothing written; when nothing would " +
        "change, 200 and nothing is written. Concurrent PUTs of one external id create one ticket between them. Accepts `If-Match` (on an " +
        "update; with no ticket, 412) and `Idempotency-Key`.",
    }),
  })
  .input(TicketUpsertItem)
  .output(TicketObject)
  .mutation(putResolver(ticketUpserts));
