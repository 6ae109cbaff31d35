// GET /public/v1/tickets/{ticket_id} — one ticket with its thread, oldest first (scope
// tenant:tickets.read). Unknown or foreign → 404. The thread is bounded by the database as in lists
// (500 comments, 150,000 characters). Sends its version as the ETag; If-None-Match naming it → 304.
import { z } from "zod";
import { TicketObject } from "../../model/ticket.js";
import { Id } from "../_lib/schemas.js";
import { scoped } from "../trpc.js";
import { loadTicket, TICKET_COMMENTS_MAX, TICKET_THREAD_CHARS_MAX } from "./schemas.js";

export const GetTicketInput = z.object({ ticket_id: Id });

export const getTicket = scoped("tenant:tickets.read")
  .meta({
    errors: ["NOT_FOUND"],
    openapi: {
      method: "GET",
      path: "/public/v1/tickets/{ticket_id}",
      tags: ["tickets"],
      summary: "Get one ticket",
      description:
        `A ticket of the tenant with its whole thread, oldest first (at most ${TICKET_COMMENTS_MAX} comments of ${TICKET_THREAD_CHARS_MAX} characters in all). ` +
        "An unknown or foreign ticket gives 404. The `ETag` is the ticket's version; `If-None-Match` naming it answers 304 without a body.",
      protect: true,
    },
  })
  .input(GetTicketInput)
  .output(TicketObject)
  .query(({ ctx, input }) => loadTicket(ctx, input.ticket_id));
