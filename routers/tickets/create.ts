// POST /public/v1/tickets — create a ticket (tenant:tickets.manage, 201, Idempotency-Key).
// Rules, in order:
//   1. body is strict (unknown fields → 422); subject 1–500 characters; comment 1–10000 characters;
//      at least one of customerId (a Contact), leadId, conversationId (else 422 VALIDATION_ERROR).
//   2. every given id must be the tenant's (else 404, nothing persisted): the contact (live, not
//      soft-deleted), the lead, the conversation, and assignedTo as an ASSIGNABLE user of the tenant.
//   3. the ticket is `open`, created by the key owner; an optional `comment` becomes the first
//      comment of the thread, authored by the key owner, in the same transaction.
import { z } from "zod";
import { TicketObject, toTicket } from "../../model/ticket.js";
import { Id } from "../_lib/schemas.js";
import { idempotent } from "../_lib/idempotent.js";
import { ExternalId, externalIdConflict } from "../_lib/sync.js";
import { mustExist, owned } from "../_lib/tenant.js";
import { scoped, type AuthedContext } from "../trpc.js";
import { insertRow } from "../../server/db/insert.js";
import { commentRow, ticketRow } from "./model.js";
import { CommentBody, mustBeAssignable, Subject } from "./schemas.js";

const LINKS = ["customerId", "leadId", "conversationId"] as const;

/** The create body's fields (without the rule over the links). */
export const TicketFields = z
  .object({
    customerId: Id.nullish().meta({ description: "a contact of the tenant" }),
    leadId: Id.nullish().meta({ description: "a lead of the tenant" }),
    conversationId: Id.nullish().meta({ description: "a conversation of the tenant" }),
    subject: Subject,
    assignedTo: Id.nullish().meta({ description: "an assignable user of the tenant; omitted or null: unassigned" }),
    comment: CommentBody.nullish().meta({
      description: "1 to 10000 characters; becomes the first comment, authored by the key owner",
    }),
    externalId: ExternalId.nullable().optional(),
  })
  .strict();

export const CreateTicketInput = TicketFields.superRefine(atLeastOneLink).meta({
  description: "At least one of customerId, leadId, conversationId is required (else 422). Unknown fields give 422.",
});

/** The create's rule over the links: at least one of customerId, leadId, conversationId (also the upsert's body, routers/tickets/upsert.ts). */
export function atLeastOneLink(
  v: { customerId?: string | null; leadId?: string | null; conversationId?: string | null },
  c: z.RefinementCtx,
) {
  if (!LINKS.some((k) => v[k])) {
    c.addIssue({
      code: "custom",
      path: [],
      message: "At least one of customerId, leadId, conversationId is required",
      params: { fields: LINKS },
    });
  }
}
type CreateTicketInput = z.output<typeof CreateTicketInput>;

export const createTicket = scoped("tenant:tickets.manage")
  .meta({
    errors: ["NOT_FOUND", "ALREADY_EXISTS"],
    openapi: {
      method: "POST",
      path: "/public/v1/tickets",
      tags: ["tickets"],
      summary: "Create a ticket",
      description:
        "Creates an `open` ticket linked to at least one of a contact (`customerId`), a lead or a conversation of the tenant " +
        "(none → 422). A foreign or unknown id, or an `assignedTo` that is not an assignable user of the tenant, gives 404 " +
        "with nothing persisted. `createdBy` is the API key's owner; an optional `comment` becomes the first comment of " +
        "the thread, authored by the key owner. An `externalId` that another ticket of the tenant holds gives 409 ALREADY_EXISTS naming it " +
        "in `details.existingId`. Accepts an `Idempotency-Key` header.",
      protect: true,
    },
    successStatus: 201,
    location: "/public/v1/tickets/{id}",
  })
  .input(CreateTicketInput)
  .output(TicketObject)
  .mutation(idempotent(({ ctx, input }) => insertTicket(ctx, input)));

/**
 * The create's rules and writes, on ctx.db (a transaction): also the create of an upsert by external
 * id (routers/tickets/upsert.ts), which sends no comment.
 */
export async function insertTicket(ctx: AuthedContext, input: CreateTicketInput) {
  // 404s: every id resolved before any write.
  if (input.customerId)
    await mustExist(
      ctx.db.contact.findFirst({ where: owned(ctx, { id: input.customerId, deletedAt: null }), select: { id: true } }),
      "Contact",
    );
  if (input.leadId)
    await mustExist(ctx.db.lead.findFirst({ where: owned(ctx, { id: input.leadId }), select: { id: true } }), "Lead");
  if (input.conversationId)
    await mustExist(
      ctx.db.conversation.findFirst({ where: owned(ctx, { id: input.conversationId }), select: { id: true } }),
      "Conversation",
    );
  if (input.assignedTo) await mustBeAssignable(ctx, input.assignedTo);

  const ticket = ticketRow(ctx, input);
  await insertRow(ctx.db, { table: "Ticket", row: ticket }).catch((err) =>
    externalIdConflict(err, ctx.tenantId, "Ticket", input.externalId),
  );
  // The first comment's admission updates the ticket in the same transaction: still version 1 (row_version).
  const comments = input.comment ? [commentRow(ctx, ticket.id, input.comment)] : [];
  for (const comment of comments) await insertRow(ctx.db, { table: "TicketComment", row: comment });
  return toTicket({ ...ticket, comments });
}
