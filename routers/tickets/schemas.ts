// Ticket and ticket comment: the list's select (the row, model/ticket.ts, with its thread), the input
// pieces shared by the ticket operations (status values, subject and comment bounds), the thread
// bound's error and the Idempotency-Key record of a comment. The public objects, the rows and the
// mappers: model/ticket.ts.
import { z } from "zod";
import { Prisma } from "../../generated/prisma/client.js";
import type { Database, Db } from "../../server/db/client.js";
import { dbViolation } from "../../server/db/errors.js";
import { AppError } from "../../server/errors.js";
import type { ModelOf } from "../../model/row.js";
import {
  Comment,
  Ticket,
  TICKET_STATUSES,
  toTicket,
  toTicketComment,
  type TicketComment,
  type TicketObject,
  type TicketRow,
  type TicketStatus,
} from "../../model/ticket.js";
import { readFor } from "../../server/db/insert.js";
import { budgeted, ticketSize } from "../_lib/page-budget.js";
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
export const CommentBody = Chars(
  1,
  COMMENT_MAX,
  "1 to 10000 characters; stored as sent, authored by the API key's owner",
);
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
export const fromThreadRow = (t: TicketThreadRow): TicketObject =>
  toTicket({ ...t, comments: jsonRows<ModelOf<typeof Comment>>(t.comments) });

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
    return new AppError(
      "TICKET_COMMENT_LIMIT_REACHED",
      `The comments of a ticket hold at most ${TICKET_THREAD_CHARS_MAX} characters in total`,
      {
        limit: "characters",
        max: TICKET_THREAD_CHARS_MAX,
      },
    );
  return undefined;
}

/**
 * The tickets of `ids` with their threads, in that order, within `budget` bytes of JSON: the longest
 * prefix that fits, sized from each ticket's thread counters before any thread is read (as a list
 * page is, routers/_lib/page-budget.ts), null past it; the threads of the tickets kept only, in the
 * same statement. An id the tenant has no ticket of is null.
 */
export async function presentTickets(
  ctx: { database: Database; db: Db; tenantId: string },
  ids: string[],
  budget: number,
): Promise<(TicketObject | null)[]> {
  if (ids.length === 0) return [];
  const page = Prisma.sql`
    SELECT t.*, u."ord" AS "_ord" FROM unnest(${ids}::uuid[]) WITH ORDINALITY AS u("id", "ord")
      JOIN "Ticket" t ON t."tenantId" = ${ctx.tenantId}::uuid AND t."id" = u."id"`;
  const kept = Number.isFinite(budget)
    ? budgeted(page, ticketSize(ctx.tenantId), Prisma.sql`"_ord"`, { budget })
    : page;
  const rows = await readFor(ctx.database, ctx.db, { isoTimes: true, tenant: ctx.tenantId })<TicketThreadRow>(
    selectTickets(ctx.tenantId, kept),
  );
  const byId = new Map(rows.map((r) => [r.id, r]));
  return ids.map((id) => {
    const row = byId.get(id.toLowerCase());
    return row ? fromThreadRow(row) : null;
  });
}

/** A ticket as an Idempotency-Key record keeps it: its columns, and its thread as a length. */
type StoredTicket = { ticket: Omit<TicketObject, "comments">; comments: number };

/**
 * What an Idempotency-Key stores for an answer holding tickets (a comment, a PUT, a batch): each
 * ticket's scalars at that moment and its thread length, not the thread. Comments are immutable and
 * numbered per ticket in commit order (`seq`), and the thread an answer showed is exactly the
 * comments with seq <= its length (concurrent commenters of one ticket serialize on its row), so the
 * replay rebuilds the identical body, from the record and the comments, never from the ticket's
 * current row. Storage per ticket: under 4 KB whatever its thread.
 */
export const ticketRecord = {
  store: ({ comments, ...ticket }: TicketObject): StoredTicket => ({ ticket, comments: comments.length }),
  /** The tickets of many records, their threads read in one statement. */
  async rebuild(ctx: { db: Db; tenantId: string }, stored: StoredTicket[]): Promise<TicketObject[]> {
    const threads = new Map<string, TicketComment[]>(stored.map((s) => [s.ticket.id, []]));
    const wanted = stored.filter((s) => s.comments > 0);
    if (wanted.length) {
      const rows = await ctx.db.$queryRaw<(ModelOf<typeof Comment> & { ticketId: string })[]>`
        SELECT c."ticketId", ${Comment.select("c")}
          FROM unnest(${wanted.map((s) => s.ticket.id)}::uuid[], ${wanted.map((s) => s.comments)}::int[]) AS u("id", "n")
          JOIN "TicketComment" c ON c."tenantId" = ${ctx.tenantId}::uuid AND c."ticketId" = u."id" AND c."seq" <= u."n"
         ORDER BY c."ticketId", c."createdAt", c."id"`;
      for (const r of rows) threads.get(r.ticketId)!.push(toTicketComment(r));
    }
    return stored.map(({ ticket: t }) => ({
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
      comments: threads.get(t.id)!,
    }));
  },
};

/** A comment's answer (one ticket) as its record: ticketRecord for one. */
export const oneTicketRecord = {
  store: ticketRecord.store,
  rebuild: async (ctx: { db: Db; tenantId: string }, stored: StoredTicket) =>
    (await ticketRecord.rebuild(ctx, [stored]))[0]!,
};

/** The tenant's ticket with its thread, or 404. */
export async function loadTicket(ctx: { db: Db; tenantId: string }, id: string): Promise<TicketObject> {
  return toTicket(
    await mustExist(ctx.db.ticket.findFirst({ where: owned(ctx, { id }), include: withComments }), "Ticket"),
  );
}

/** An assignable user of the tenant, or 404 (a non-assignable, foreign or unknown user look alike). */
export async function mustBeAssignable(ctx: { db: Db; tenantId: string }, userId: string): Promise<void> {
  await mustExist(
    ctx.db.user.findFirst({ where: owned(ctx, { id: userId, assignable: true }), select: { id: true } }),
    "Assignable user",
  );
}
