// Tickets' write model, stated once: the rows a create stores (POST and PUT's create build them here:
// the ticket, and its first comment when one is given), what PATCH and PUT may change, what only a
// create sets (PUT compares it: 422 `immutable`), and the unique key behind the 409.
import { randomUUID } from "node:crypto";
import type { CommentRow, TicketRow } from "../../model/ticket.js";
import type { StoredRow } from "../../model/row.js";
import type { AuthedContext } from "../trpc.js";
import { storedId, type CreateOnly } from "../_lib/upsert.js";

export interface TicketCreate {
  customerId?: string | null;
  leadId?: string | null;
  conversationId?: string | null;
  subject: string;
  assignedTo?: string | null;
  externalId?: string | null;
}

export const TICKET_WRITES = {
  /** PATCH's fields; PUT applies subject and assignedTo of them. */
  updatable: ["status", "subject", "assignedTo", "externalId"],
  /** What PUT applies to an object it finds (every other field of its body is create-only). */
  put: ["subject", "assignedTo"],
  /** Set by a create only: PUT's body must leave them out or name the stored values (ids in any case). */
  createOnly: {
    customerId: (v, t) => storedId(v) === t.customerId,
    leadId: (v, t) => storedId(v) === t.leadId,
    conversationId: (v, t) => storedId(v) === t.conversationId,
  } satisfies CreateOnly<
    TicketCreate,
    { customerId: string | null; leadId: string | null; conversationId: string | null }
  >,
  unique: { externalId: "Ticket_tenantId_externalId_key" },
} as const;

/** The ticket row a create stores: open, created by the key's owner, version 1 (a first comment is the same version). */
export function ticketRow(ctx: AuthedContext, input: TicketCreate) {
  const now = ctx.services.now();
  const row = {
    id: randomUUID(),
    tenantId: ctx.tenantId,
    customerId: input.customerId ?? null,
    leadId: input.leadId ?? null,
    conversationId: input.conversationId ?? null,
    subject: input.subject,
    status: "open" as const,
    createdById: ctx.caller.ownerId,
    assignedToId: input.assignedTo ?? null,
    externalId: input.externalId ?? null,
    version: 1,
    createdAt: now,
    updatedAt: now,
  };
  // Every column of the row: a column added to model/ticket.ts and not written here fails to compile.
  return row satisfies StoredRow<TicketRow, never, "comments">;
}

/** A comment row, authored by the key's owner (the thread's bounds and numbering are the database's). */
export function commentRow(ctx: AuthedContext, ticketId: string, body: string) {
  const row = {
    id: randomUUID(),
    tenantId: ctx.tenantId,
    ticketId,
    authorUserId: ctx.caller.ownerId,
    body,
    createdAt: ctx.services.now(),
  };
  return row satisfies StoredRow<CommentRow, "ticketId">;
}
