// Ticket and ticket comment: the list's select (the row, model/ticket.ts, with its thread), the input
// pieces shared by the ticket operations (status values, subject and comment bounds), the thread
// bound's error and the Idempotency-Key record of a comment. The public objects, the rows and the
// mappers: model/ticket.ts.
import { z } from "zod";
import { Prisma } from "../../generated/prisma/client.js";
import type { Db } from "../../server/db/client.js";
import { dbViolation } from "../../server/db/errors.js";
import { AppError } from "../../server/errors.js";
import type { ModelOf } from "../../model/row.js";
import { Comment, Ticket, TICKET_STATUSES, toTicket, toTicketComment, type TicketObject, type TicketRow, type TicketStatus } from "../../model/ticket.js";
import { jsonRows } from "../_lib/totals.js";
import { mustExist, owned } from "../_lib/tenant.js";

export const isTicketStatus = (s: string): s is TicketStatus => (TICKET_STATUSES as readonly string[]).includes(s);

export const SUBJECT_MAX = 500;
export const COMMENT_MAX = 10_000;
/**
 * Bounds of one ticket's thread, held by the database (the TicketComment_admit trigger of migration
 * 20261123100000_bounded_work; these constants restate them for messages and tests). A character
 * is at most 6 bytes of JSON (U+0000–U+001F as \u00XX), so a whole ticket stays under 1 MB.
 */
export const TICKET_COMMENTS_MAX = 500;
export const TICKET_THREAD_CHARS_MAX = 150_000;

/** Length in characters (Unicode code points, as PostgreSQL counts them), not UTF-16 units. */
const chars = (s: string) => [...s].length;

/** A string of min..max characters (code points: an emoji is one character). */
export function Chars(min: number, max: number, description: string) {
  return z
    .string()
    .refine((s) => chars(s) >= min, { message: `must be at least ${min} character${min === 1 ? "" : "s"}` })
    .refine((s) => chars(s) <= max, { message: `must be at most ${max} characters` })
    .meta({ minLength: min, maxLength: max, description });
}

export const Subject = Chars(1, SUBJECT_MAX, "1 to 500 characters");
export const CommentBody = Chars(1, COMMENT_MAX, "1 to 10000 characters; stored as sent, authored by the API key's owner");
export const TicketStatusInput = z
  .enum(TICKET_STATUSES, { message: `must be one of ${TICKET_STATUSES.join(", ")}` })
  .meta({ description: "one of open, pending, resolved, closed" });

/** A selectTickets() row: the ticket's columns and its thread as JSON (json_agg). */
export type TicketThreadRow = Omit<TicketRow, "comments"> & { comments: unknown };

/** json_build_object's arguments for a comment of the thread: each column of the comment row by name. */
const threadFields = Prisma.raw(Comment.names.map((n) => `'${n}', ${Comment.sql(n, "c")}`).join(", "));

/**
 * The tickets `tickets` selects (a statement giving whole "Ticket" rows), each with its thread in
 * one json_agg (oldest first, ties by id), as the list and the changes feed read them.
 */
export const selectTickets = (tenantId: string, tickets: Prisma.Sql) => Prisma.sql`
  SELECT ${Ticket.select("t")},
         (SELECT coalesce(json_agg(json_build_object(${threadFields}) ORDER BY c."createdAt", c."id"), '[]'::json)
            FROM "TicketComment" c WHERE c."tenantId" = ${tenantId}::uuid AND c."ticketId" = t."id") AS "comments"
    FROM (${tickets}) t`;

/** A selectTickets() row → the public ticket (the thread's instants, PostgreSQL's JSON form, made Iso by the mapper). */
export const fromThreadRow = (t: TicketThreadRow): TicketObject => toTicket({ ...t, comments: jsonRows<ModelOf<typeof Comment>>(t.comments) });

/** The embedded thread: oldest first, ties by id. */
export const COMMENT_ORDER = [{ createdAt: "asc" as const }, { id: "asc" as const }];
/** Prisma include for the thread (batched by Prisma into one query per page, never one per ticket). */
export const withComments = { comments: { orderBy: COMMENT_ORDER } };

/** 409 TICKET_COMMENT_LIMIT_REACHED for a comment the database refused as past a thread bound, else undefined. */
export function commentLimitError(err: unknown): AppError | undefined {
  const v = dbViolation(err);
  if (v?.sqlState !== "23514") return undefined;
  if (v.constraint === "Ticket_comment_count_limit")
    return new AppError("TICKET_COMMENT_LIMIT_REACHED", `A ticket holds at most ${TICKET_COMMENTS_MAX} comments`, {
      limit: "comments",
      max: TICKET_COMMENTS_MAX,
    });
  if (v.constraint === "Ticket_comment_chars_limit")
    return new AppError("TICKET_COMMENT_LIMIT_REACHED", `The comments of a ticket hold at most ${TICKET_THREAD_CHARS_MAX} characters in total`, {
      limit: "characters",
      max: TICKET_THREAD_CHARS_MAX,
    });
  return undefined;
}

/**
 * What an Idempotency-Key stores for a comment response (routers/_lib/idempotent.ts `record`): the
 * ticket's scalars at that moment and its thread length, not the thread. Comments are immutable and
 * numbered per ticket in commit order (`seq`), and the thread a comment response showed is exactly
 * the comments with seq <= its length (concurrent commenters of one ticket serialize on its row), so
 * the replay rebuilds the identical body. Storage per record: under 4 KB whatever the thread.
 */
export const ticketRecord = {
  store: ({ comments, ...ticket }: TicketObject) => ({ ticket, comments: comments.length }),
  async rebuild(
    ctx: { db: Db; tenantId: string },
    stored: { ticket: Omit<TicketObject, "comments">; comments: number },
  ): Promise<TicketObject> {
    const t = stored.ticket;
    const rows = await ctx.db.ticketComment.findMany({
      where: owned(ctx, { ticketId: t.id, seq: { lte: stored.comments } }),
      orderBy: COMMENT_ORDER,
    });
    return {
      id: t.id,
      customerId: t.customerId,
      leadId: t.leadId,
      conversationId: t.conversationId,
      subject: t.subject,
      status: t.status as TicketStatus,
      createdBy: t.createdBy,
      assignedTo: t.assignedTo,
      externalId: t.externalId,
      version: t.version,
      createdAt: t.createdAt,
      updatedAt: t.updatedAt,
      comments: rows.map(toTicketComment),
    };
  },
};

/** The tenant's ticket with its thread, or 404. */
export async function loadTicket(ctx: { db: Db; tenantId: string }, id: string): Promise<TicketObject> {
  return toTicket(await mustExist(ctx.db.ticket.findFirst({ where: owned(ctx, { id }), include: withComments }), "Ticket"));
}

/** An assignable user of the tenant, or 404 (a non-assignable, foreign or unknown user look alike). */
export async function mustBeAssignable(ctx: { db: Db; tenantId: string }, userId: string): Promise<void> {
  await mustExist(ctx.db.user.findFirst({ where: owned(ctx, { id: userId, assignable: true }), select: { id: true } }), "Assignable user");
}
