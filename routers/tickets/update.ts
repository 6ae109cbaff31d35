// PATCH /public/v1/tickets/{ticket_id} — partial update (tenant:tickets.manage).
// Rules, in order:
//   1. body is strict: only `status` (open, pending, resolved, closed), `assignedTo` (uuid, or null
//      to unassign) and `subject` (1–500 characters); anything else → 422.
//   2. an unknown or foreign ticket → 404; a new `assignedTo` that is not an assignable user of the
//      tenant → 404; both before any write, so nothing changes.
//   3. `{}` returns the ticket unchanged; any given field is written and `updatedAt` advances.
import { z } from "zod";
import { TicketObject, toTicket } from "../../model/ticket.js";
import { Id } from "../_lib/schemas.js";
import { mustExist, owned } from "../_lib/tenant.js";
import { scoped } from "../trpc.js";
import { mustBeAssignable, Subject, TicketStatusInput, withComments } from "./schemas.js";

export const UpdateTicketInput = z
  .object({
    ticket_id: Id,
    status: TicketStatusInput.optional(),
    assignedTo: Id.nullable().optional().meta({ description: "an assignable user of the tenant, or null to unassign" }),
    subject: Subject.optional(),
  })
  .strict();

export const updateTicket = scoped("tenant:tickets.manage")
  .meta({
    errors: ["NOT_FOUND"],
    openapi: {
      method: "PATCH",
      path: "/public/v1/tickets/{ticket_id}",
      tags: ["tickets"],
      summary: "Update a ticket",
      description:
        "Partial update of `status` (open, pending, resolved, closed; any move is allowed), `assignedTo` (an assignable " +
        "user of the tenant, or null to unassign) and `subject`. An unknown or foreign ticket, or an `assignedTo` that is " +
        "not an assignable user of the tenant, gives 404 with no change. Any given field advances `updatedAt`; an empty " +
        "body returns the ticket unchanged.",
      protect: true,
    },
  })
  .input(UpdateTicketInput)
  .output(TicketObject)
  .mutation(async ({ ctx, input }) => {
    const { ticket_id, ...changes } = input;
    const ticket = await mustExist(ctx.db.ticket.findFirst({ where: owned(ctx, { id: ticket_id }), include: withComments }), "Ticket");
    if (typeof changes.assignedTo === "string") await mustBeAssignable(ctx, changes.assignedTo);

    const given = Object.values(changes).some((v) => v !== undefined);
    if (!given) return toTicket(ticket);

    const row = await ctx.db.ticket.update({
      where: { tenantId_id: { tenantId: ctx.tenantId, id: ticket_id } },
      data: {
        ...(changes.status !== undefined && { status: changes.status }),
        ...(changes.subject !== undefined && { subject: changes.subject }),
        ...(changes.assignedTo !== undefined && { assignedToId: changes.assignedTo }),
        updatedAt: ctx.services.now(),
      },
      include: withComments,
    });
    return toTicket(row);
  });
