// Ticket and ticket comment: the public objects, their serializer, and the input pieces shared by
// the ticket operations (status values, subject and comment bounds, the row shape with its thread).
import { z } from "zod";
import { Prisma } from "../../generated/prisma/client.js";
import type { Db } from "../../server/db/client.js";
import { dbViolation } from "../../server/db/errors.js";
import { AppError } from "../../server/errors.js";
import { iso, Timestamp, type Instant } from "../_lib/schemas.js";
import { jsonRows } from "../_lib/totals.js";
import { mustExist, owned } from "../_lib/tenant.js";

export const TICKET_STATUSES = ["open", "pending", "resolved", "closed"] as const;
export type TicketStatus = (typeof TICKET_STATUSES)[number];
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

export const TicketComment = z.object({
  id: z.string(),
  authorUserId: z.string(),
  body: z.string(),
  createdAt: Timestamp,
}).meta({ id: "TicketComment" });
export type TicketComment = z.infer<typeof TicketComment>;

export const TicketObject = z.object({
  id: z.string(),
  customerId: z.string().nullable(),
  leadId: z.string().nullable(),
  conversationId: z.string().nullable(),
  subject: z.string(),
  status: z.enum(TICKET_STATUSES),
  createdBy: z.string(),
  assignedTo: z.string().nullable(),
  createdAt: Timestamp,
  updatedAt: Timestamp,
  comments: z.array(TicketComment).meta({ description: "the thread, oldest first" }),
}).meta({ id: "Ticket" });
export type TicketObject = z.infer<typeof TicketObject>;

export interface TicketCommentRow {
  id: string;
  authorUserId: string;
  body: string;
  createdAt: Instant;
}

export interface TicketRow {
  id: string;
  customerId: string | null;
  leadId: string | null;
  conversationId: string | null;
  subject: string;
  /** The "TicketStatus" domain (the database checks the value). */
  status: string;
  createdById: string;
  assignedToId: string | null;
  createdAt: Instant;
  updatedAt: Instant;
}

/** A ticket row with its thread as JSON (selectTickets): the comments' createdAt are ISO strings there. */
export type TicketThreadRow = TicketRow & { comments: unknown };
type TicketCommentJson = Omit<TicketCommentRow, "createdAt"> & { createdAt: string };

/**
 * The tickets `tickets` selects (a statement giving whole "Ticket" rows), each with its thread in
 * one json_agg (oldest first, ties by id), as the list and the changes feed read them.
 */
export const selectTickets = (tenantId: string, tickets: Prisma.Sql) => Prisma.sql`
  SELECT t."id", t."customerId", t."leadId", t."conversationId", t."subject", t."status", t."createdById", t."assignedToId",
         t."createdAt", t."updatedAt",
         (SELECT coalesce(json_agg(json_build_object('id', c."id", 'authorUserId', c."authorUserId", 'body', c."body",
                                                     'createdAt', c."createdAt") ORDER BY c."createdAt", c."id"), '[]'::json)
            FROM "TicketComment" c WHERE c."tenantId" = ${tenantId}::uuid AND c."ticketId" = t."id") AS "comments"
    FROM (${tickets}) t`;

/** A selectTickets() row → the public ticket. */
export const fromThreadRow = (t: TicketThreadRow): TicketObject =>
  toTicket({ ...t, comments: jsonRows<TicketCommentJson>(t.comments).map((c) => ({ ...c, createdAt: new Date(c.createdAt) })) });

/** The embedded thread: oldest first, ties by id. */
export const COMMENT_ORDER = [{ createdAt: "asc" as const }, { id: "asc" as const }];
/** Prisma include for the thread (batched by Prisma into one query per page, never one per ticket). */
export const withComments = { comments: { orderBy: COMMENT_ORDER } };

export const toTicketComment = (c: TicketCommentRow): TicketComment => ({
  id: c.id,
  authorUserId: c.authorUserId,
  body: c.body,
  createdAt: iso(c.createdAt),
});

export const toTicket = (t: TicketRow & { comments: TicketCommentRow[] }): TicketObject => ({
  id: t.id,
  customerId: t.customerId,
  leadId: t.leadId,
  conversationId: t.conversationId,
  subject: t.subject,
  status: t.status as TicketStatus,
  createdBy: t.createdById,
  assignedTo: t.assignedToId,
  createdAt: iso(t.createdAt),
  updatedAt: iso(t.updatedAt),
  comments: t.comments.map(toTicketComment),
});

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
