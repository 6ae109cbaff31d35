// PATCH /public/v1/tickets/{ticket_id} — partial update (tenant:tickets.manage).
// Rules, in order:
//   1. body is strict: only `status` (open, pending, resolved, closed), `assignedTo` (uuid, or null
//      to unassign) and `subject` (1–500 characters); anything else → 422.
//   2. an unknown or foreign ticket → 404; a new `assignedTo` that is not an assignable user of the
//      tenant → 404; both before any write, so nothing changes.
//   3. If-Match naming none of the ticket's versions → 412 PRECONDITION_FAILED (routers/_lib/sync.ts);
//      the UPDATE writes only while the ticket still has the version checked.
//   4. `externalId` (null clears) held by another ticket of the tenant → 409 ALREADY_EXISTS naming it.
//   5. `{}` returns the ticket unchanged; any given field is written and `updatedAt` advances.
import { z } from "zod";
import { TicketObject } from "../../model/ticket.js";
import { Id } from "../_lib/schemas.js";
import { mustExist, owned } from "../_lib/tenant.js";
import {
  checkVersion,
  ExternalId,
  externalIdConflict,
  missedWrite,
  preconditionOf,
  versionGuard,
  type EntityTags,
} from "../_lib/sync.js";
import { scoped, type AuthedContext } from "../trpc.js";
import type { TicketStatus } from "../../model/ticket.js";
import { loadTicket, mustBeAssignable, Subject, TicketStatusInput } from "./schemas.js";

export const UpdateTicketInput = z
  .object({
    ticket_id: Id,
    status: TicketStatusInput.optional(),
    assignedTo: Id.nullable().optional().meta({ description: "an assignable user of the tenant, or null to unassign" }),
    subject: Subject.optional(),
    externalId: ExternalId.nullable().optional(),
  })
  .strict();

export const updateTicket = scoped("tenant:tickets.manage")
  .meta({
    errors: ["NOT_FOUND", "ALREADY_EXISTS", "PRECONDITION_FAILED"],
    openapi: {
      method: "PATCH",
      path: "/public/v1/tickets/{ticket_id}",
      tags: ["tickets"],
      summary: "Update a ticket",
      description:
        "Partial update of `status` (open, pending, resolved, closed; any move is allowed), `assignedTo` (an assignable " +
        "user of the tenant, or null to unassign) and `subject`. An unknown or foreign ticket, or an `assignedTo` that is " +
        "not an assignable user of the tenant, gives 404 with no change. Any given field advances `updatedAt`; an empty " +
        "body returns the ticket unchanged. `externalId` (null clears) held by another ticket gives 409 ALREADY_EXISTS naming it in " +
        "`details.existingId`. Accepts `If-Match`: when it names no current version, 412 PRECONDITION_FAILED with the current `ETag`, " +
        "and nothing is written.",
      protect: true,
    },
  })
  .input(UpdateTicketInput)
  .output(TicketObject)
  .mutation(async ({ ctx, input }) => {
    const { ticket_id, ...changes } = input;
    const pre = preconditionOf(ctx);
    // The ticket's own columns decide; its thread is read once, for the answer.
    const ticket = await mustExist(ctx.db.ticket.findFirst({ where: owned(ctx, { id: ticket_id }) }), "Ticket");
    if (typeof changes.assignedTo === "string") await mustBeAssignable(ctx, changes.assignedTo);
    checkVersion(pre, ticket.version);
    await writeTicket(ctx, ticket, changes, pre);
    return loadTicket(ctx, ticket_id);
  });

type TicketChanges = {
  status?: TicketStatus;
  subject?: string;
  assignedTo?: string | null;
  externalId?: string | null;
};

/**
 * The given fields written in one UPDATE (updatedAt advances), with If-Match only while the ticket
 * still has the version checked; the ticket's row (without its thread) as it is then. No field
 * given: nothing is written. Also the update of an upsert by external id (routers/tickets/upsert.ts), which gives
 * only the fields that differ.
 */
export async function writeTicket<R extends { id: string; version: number }>(
  ctx: AuthedContext,
  ticket: R,
  changes: TicketChanges,
  pre: EntityTags | undefined,
) {
  if (!Object.values(changes).some((v) => v !== undefined)) return ticket;
  const rows = await ctx.db.ticket
    .updateManyAndReturn({
      where: owned(ctx, { id: ticket.id, ...versionGuard(pre, ticket.version) }),
      data: {
        ...(changes.status !== undefined && { status: changes.status }),
        ...(changes.subject !== undefined && { subject: changes.subject }),
        ...(changes.assignedTo !== undefined && { assignedToId: changes.assignedTo }),
        ...(changes.externalId !== undefined && { externalId: changes.externalId }),
        updatedAt: ctx.services.now(),
      },
    })
    .catch((err) => externalIdConflict(err, ctx.tenantId, "Ticket", changes.externalId));
  return rows[0] ?? missedWrite(ctx.db.ticket.findFirst({ where: owned(ctx, { id: ticket.id }) }), "Ticket");
}
