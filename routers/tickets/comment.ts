// POST /public/v1/tickets/{ticket_id}/comments — add a comment (tenant:tickets.manage, 201,
// Idempotency-Key: it creates a comment).
// Rules, in order:
//   1. body is strict: `body` required, 1–10000 characters; anything else → 422.
//   2. an unknown or foreign ticket → 404, nothing persisted.
//   3. If-Match naming none of the ticket's versions → 412 PRECONDITION_FAILED, checked on the
//      ticket's row locked in the comment's transaction (routers/_lib/sync.ts).
//   4. the comment is authored by the key owner; the ticket's status is never changed (a closed or
//      resolved ticket stays so); the ticket's `updatedAt` advances (a comment is activity on it);
//      its version grows by one (the comment and the updatedAt are one transaction: row_version).
//   5. the thread is bounded (TICKET_COMMENTS_MAX comments, TICKET_THREAD_CHARS_MAX characters, held
//      by the database): a comment past either → 409 TICKET_COMMENT_LIMIT_REACHED, nothing stored.
//   6. returns the full refreshed ticket with its whole thread, oldest first; an Idempotency-Key
//      stores the ticket's scalars and thread length only (ticketRecord), a replay rebuilds it.
import { z } from "zod";
import { TicketObject } from "../../model/ticket.js";
import { Id } from "../_lib/schemas.js";
import { idempotent } from "../_lib/idempotent.js";
import { mustExist, owned } from "../_lib/tenant.js";
import { checkVersion, preconditionOf } from "../_lib/sync.js";
import { scoped } from "../trpc.js";
import { Prisma } from "../../generated/prisma/client.js";
import { insertRow } from "../../server/db/insert.js";
import { commentRow } from "./model.js";
import {
  CommentBody,
  commentLimitError,
  loadTicket,
  oneTicketRecord,
  TICKET_COMMENTS_MAX,
  TICKET_THREAD_CHARS_MAX,
} from "./schemas.js";

export const AddTicketCommentInput = z.object({ ticket_id: Id, body: CommentBody }).strict();

export const addTicketComment = scoped("tenant:tickets.manage")
  .meta({
    errors: ["NOT_FOUND", "TICKET_COMMENT_LIMIT_REACHED", "PRECONDITION_FAILED"],
    openapi: {
      method: "POST",
      path: "/public/v1/tickets/{ticket_id}/comments",
      tags: ["tickets"],
      summary: "Add a comment to a ticket",
      description:
        "Adds a comment (`body`, 1 to 10000 characters) authored by the API key's owner and returns the full refreshed " +
        "ticket with its whole thread, oldest first. Valid on any status, including resolved and closed: the status is " +
        "never changed (a comment does not reopen a ticket). The ticket's `updatedAt` advances to the comment's time. " +
        "An unknown or foreign ticket gives 404 with nothing persisted. A ticket holds at most " +
        `${TICKET_COMMENTS_MAX} comments of at most ${TICKET_THREAD_CHARS_MAX} characters in total: a comment past either bound gives ` +
        "409 `TICKET_COMMENT_LIMIT_REACHED` (`details.limit`: `comments` or `characters`) with nothing persisted. " +
        "Each comment adds one to the ticket's `version`. Accepts `If-Match` (412 PRECONDITION_FAILED with the current `ETag` when it " +
        "names no current version, nothing stored) and an `Idempotency-Key` header.",
      protect: true,
    },
    successStatus: 201,
  })
  .input(AddTicketCommentInput)
  .output(TicketObject)
  .mutation(
    idempotent(
      async ({ ctx, input }) => {
        const pre = preconditionOf(ctx);
        if (pre) {
          // The ticket's row locked until the comment commits: no other write can change its version in between.
          const [row] = await ctx.db.$queryRaw<{ version: number }[]>(
            Prisma.sql`SELECT "version" FROM "Ticket" WHERE "tenantId" = ${ctx.tenantId}::uuid AND "id" = ${input.ticket_id}::uuid FOR NO KEY UPDATE`,
          );
          checkVersion(pre, (await mustExist(row ?? null, "Ticket")).version);
        } else
          await mustExist(
            ctx.db.ticket.findFirst({ where: owned(ctx, { id: input.ticket_id }), select: { id: true } }),
            "Ticket",
          );
        const comment = commentRow(ctx, input.ticket_id, input.body);
        await insertRow(ctx.db, { table: "TicketComment", row: comment }).catch((err) => {
          throw commentLimitError(err) ?? err;
        });
        await ctx.db.ticket.update({
          where: { tenantId_id: { tenantId: ctx.tenantId, id: input.ticket_id } },
          data: { updatedAt: comment.createdAt },
        });
        return loadTicket(ctx, input.ticket_id);
      },
      { record: oneTicketRecord },
    ),
  );
