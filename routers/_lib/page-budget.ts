// The byte budget of every list page (issue 25, point 4): tickets with their threads, conversations,
// messages, leads, contacts, appointments, the changes feed and the reference lists (stages, users,
// channels, templates: routers/_lib/reference.ts). A page holds at most `limit` items and
// at most PAGE_BUDGET_BYTES of JSON; a page that reaches the budget holds fewer items (at least one),
// and says there is more (`pagination.hasNext`, `hasMore`).
//
// The cut is made in the database, before the rows are loaded: the page's SELECT is wrapped in its own
// statement (budgetCut) and only rows that fit come back; a ticket's thread is built only for them.
// Each item's JSON size is known in SQL in two ways (ItemSize):
//   ub     an upper bound from lengths PostgreSQL keeps (octet_length of a text is its stored length,
//          no detoasting; a ticket's thread from its counters): 6 bytes per byte of text (a control
//          character is \u00XX in JSON), plus the fixed part — cheap, every row;
//   exact  the JSON bytes themselves, to_json() of each text (PostgreSQL escapes a string exactly as
//          JSON.stringify does: \" \\ \b \f \n \r \t, \u00xx below U+0020, everything else as is),
//          plus the fixed part (an upper bound of everything but the texts: every nullable field set,
//          the longest enum value and number) — reads the texts, so it is computed only when the
//          page's ubs sum past the budget, and then only for the rows returned and one more.
// Two forms of the same page (cutToBudget): "gate" — every row when the page's ubs sum within the
// budget, else none (a window sum over at most `limit` rows: what every common page costs, ~0.1 ms
// of database time on a 50-row page); "walk" (budgeted()) — the longest prefix that fits by exact
// sizes, asked for only when the gate came back empty where rows were due: a second statement, only
// for a page that may reach the budget.
// An item's size always counts one separating comma; the envelope (total, pagination, cursors, the
// tRPC wrapper) has ENVELOPE_BYTES of the budget.
import { Prisma } from "../../generated/prisma/client.js";
import { Appointment, toAppointment } from "../../model/appointment.js";
import { Contact, toContact } from "../../model/contact.js";
import { Conversation, Message, toConversation, toMessage } from "../../model/conversation.js";
import { Lead, toLead } from "../../model/lead.js";

import { Comment, Ticket, toTicket, toTicketComment } from "../../model/ticket.js";
import { Stage, toStage } from "../../model/stage.js";
import { toUser, User } from "../../model/user.js";
import { Channel, toChannel } from "../../model/channel.js";
import { Template, toTemplate } from "../../model/template.js";

/** The most bytes of JSON a list response body holds (any list; at least one item always comes). */
export const PAGE_BUDGET_BYTES = 4 * 1024 * 1024;
/** Kept for the envelope around the items: `total`, `pagination`, cursors (under 400 bytes), tRPC's `{"result":{"data":…}}`. */
export const ENVELOPE_BYTES = 1024;
/** What the items of one page may take. */
export const ITEMS_BUDGET_BYTES = PAGE_BUDGET_BYTES - ENVELOPE_BYTES;
/**
 * What the items of each call of a /trpc batch of `calls` calls may take: the batch's one response
 * has one page budget, shared equally (each call's page then holds fewer items, with hasNext/hasMore
 * true). An item larger than its share comes alone, for one call of the batch (OversizeAllowance).
 */
export const batchShare = (calls: number) => Math.floor(PAGE_BUDGET_BYTES / Math.max(1, calls)) - ENVELOPE_BYTES;

/**
 * A /trpc batch's one allowance for a page whose only item is larger than its call's share, so a
 * batch's answer stays within about one page budget plus one item (at most ~1 MB: a ticket with its
 * whole thread). The first call to need it takes it; a later one answers no item, with hasNext /
 * hasMore true and a continuation at its own position — the same call sent alone (no batch) always
 * answers at least one item, so a paging client never loops. Only tickets (and the feed, which carries
 * them) have items that can pass the smallest share (~204 KB, a batch of 20 calls): the widest item of
 * every other list is far below it (test/db/page-budget.test.ts).
 */
export interface OversizeAllowance {
  taken: boolean;
}

/** Whether a page may answer `item` as its only item: within the share, alone (no batch), or the batch's allowance taken now. */
export function oversizedAllowed(ctx: { pageBudget: number; oversized?: OversizeAllowance }, item: unknown): boolean {
  if (!ctx.oversized || Buffer.byteLength(JSON.stringify(item)) <= ctx.pageBudget) return true;
  if (ctx.oversized.taken) return false;
  ctx.oversized.taken = true;
  return true;
}

/** The sentence every list operation's OpenAPI description ends with. */
export const BUDGET_DOC =
  `A page holds at most \`limit\` items and at most ${PAGE_BUDGET_BYTES} bytes (4 MiB) of JSON: a page that reaches the budget holds fewer items ` +
  "(always at least one; an item larger than the budget by itself comes alone)";
/** …for the offset lists: what the envelope says of a page cut by the budget. */
export const OFFSET_BUDGET_DOC =
  `${BUDGET_DOC}, with \`pagination.hasNext\` true and \`total\` unchanged — continue at \`offset\` + the number of items received ` +
  "(each item then comes exactly once). `pagination.pageSize` is the `limit` asked for, `page` and `totalPages` count pages of that size.";

/** A SQL expression of an item's JSON size in bytes (module comment). */
export interface ItemSize {
  ub: Prisma.Sql;
  exact: Prisma.Sql;
}

/** A column of the row being sized, as SQL (the page's alias `p`, or a table alias in the feed). */
export type Col = (name: string) => Prisma.Sql;
export const pageCol: Col = (name) => Prisma.raw(`p."${name}"`);

const big = (n: number) => Prisma.raw(`${n}::bigint`);

/** The size of a nullable text column: `"…"` escaped, or `null`. */
function text(c: Prisma.Sql): ItemSize {
  return {
    ub: Prisma.sql`(6::bigint * coalesce(octet_length(${c}), 0) + 4)`,
    exact: Prisma.sql`coalesce(octet_length(to_json(${c})::text), 4)::bigint`,
  };
}

/** The size of a text[] column: `["…","…"]` (`null` elements count 4 bytes, a separator 1). */
function textArray(c: Prisma.Sql): ItemSize {
  return {
    ub: Prisma.sql`(6::bigint * coalesce(octet_length(array_to_string(${c}, '')), 0) + 5::bigint * coalesce(cardinality(${c}), 0) + 4)`,
    exact: Prisma.sql`coalesce(octet_length(to_json(${c})::text), 4)::bigint`,
  };
}

const plus = (parts: Prisma.Sql[]) => Prisma.sql`(${Prisma.join(parts, " + ")})`;

/** fixed + the texts. */
function sum(fixed: number, texts: ItemSize[]): ItemSize {
  return {
    ub: plus([big(fixed), ...texts.map((t) => t.ub)]),
    exact: plus([big(fixed), ...texts.map((t) => t.exact)]),
  };
}

// ---- the fixed parts: the JSON of a sample item whose texts are empty, every other field at its
// widest (a row definition's widest(), model/row.ts)

/**
 * Bytes of `sample` as JSON, less the two quotes (or brackets) of each of its `empty` text fields
 * (their sizes count them), plus one separating comma.
 */
export function fixedBytes(sample: unknown, empty: number): number {
  return Buffer.byteLength(JSON.stringify(sample)) - 2 * empty + 1;
}

/** The fixed part of a row definition's public item: its widest row mapped, less its texts' and text[]s' brackets. */
function fixedOf(def: Sized, map: (row: never) => unknown, extra: object = {}): number {
  // The widest row of `def` is a row of the definition `map` is written for.
  return fixedBytes(map({ ...def.widest(), ...extra } as never), def.texts.length + def.arrays.length);
}

export const FIXED = {
  lead: fixedOf(Lead, toLead),
  contact: fixedOf(Contact, toContact),
  conversation: fixedOf(Conversation, toConversation),
  appointment: fixedOf(Appointment, toAppointment),
  message: fixedOf(Message, toMessage),
  /** A ticket without its comments (`"comments":[]` included). */
  ticket: fixedOf(Ticket, toTicket, { comments: [] }),
  /** One comment of a thread, without its body. */
  comment: fixedOf(Comment, toTicketComment),
  // The reference lists (GET /stages, /users, /channels, /templates): their names are unbounded
  // text, so their pages are cut like any other.
  stage: fixedOf(Stage, toStage),
  user: fixedOf(User, toUser),
  channel: fixedOf(Channel, toChannel),
  /** A template, its `variables` at the widest integer. */
  template: fixedOf(Template, toTemplate, { highestPlaceholder: -2_147_483_648 }),
};

// ---- each list's item, over the columns of its page row: the fixed part, each text column and each
// text[] column of its row definition (so a text column added to a row is sized without another edit)

/** What sizing reads of a row definition (model/row.ts RowDef): its widest row, its text and text[] columns. */
interface Sized {
  widest(): object;
  texts: readonly string[];
  arrays: readonly string[];
}

function sizeOf(def: Sized, fixed: number, col: Col): ItemSize {
  return sum(fixed, [...def.texts.map((n) => text(col(n))), ...def.arrays.map((n) => textArray(col(n)))]);
}

export const leadSize = (col: Col = pageCol): ItemSize => sizeOf(Lead, FIXED.lead, col);
export const contactSize = (col: Col = pageCol): ItemSize => sizeOf(Contact, FIXED.contact, col);
/** A conversation, over selectConversations()'s columns (its customer's fields included). */
export const conversationSize = (col: Col = pageCol): ItemSize => sizeOf(Conversation, FIXED.conversation, col);
export const appointmentSize = (col: Col = pageCol): ItemSize => sizeOf(Appointment, FIXED.appointment, col);
export const messageSize = (col: Col = pageCol): ItemSize => sizeOf(Message, FIXED.message, col);
export const stageSize = (col: Col = pageCol): ItemSize => sizeOf(Stage, FIXED.stage, col);
export const userSize = (col: Col = pageCol): ItemSize => sizeOf(User, FIXED.user, col);
export const channelSize = (col: Col = pageCol): ItemSize => sizeOf(Channel, FIXED.channel, col);
export const templateSize = (col: Col = pageCol): ItemSize => sizeOf(Template, FIXED.template, col);

/**
 * A ticket with its thread, over a whole "Ticket" row: ub from the thread's counters (kept by
 * the TicketComment_admit trigger: "commentCount", "commentChars" — a character is 1 to 6 bytes of
 * JSON), exact from the comments' bodies.
 */
export function ticketSize(tenantId: string, col: Col = pageCol): ItemSize {
  const subject = text(col("subject"));
  const count = Prisma.sql`${col("commentCount")}::bigint`;
  const chars = Prisma.sql`${col("commentChars")}::bigint`;
  return {
    // A body's quotes: 2 bytes besides its characters.
    ub: Prisma.sql`(${big(FIXED.ticket)} + ${subject.ub} + ${count} * ${big(FIXED.comment + 2)} + 6 * ${chars})`,
    exact: Prisma.sql`(${big(FIXED.ticket)} + ${subject.exact}
      + (SELECT coalesce(sum(octet_length(to_json(c."body")::text) + ${big(FIXED.comment)}), 0)::bigint FROM "TicketComment" c
          WHERE c."tenantId" = ${tenantId}::uuid AND c."ticketId" = ${col("id")}))`,
  };
}

// ---- the cut

/** "gate": all of the page when its ubs fit, else none; "walk": the prefix that fits (budgeted()). */
export type Cut = "gate" | "walk";

/**
 * The page in the form `cut` asks for. "gate" adds the column "_ubAll" (the page's ubs summed);
 * "walk" is budgeted().
 */
export function budgetCut(
  cut: Cut,
  page: Prisma.Sql,
  size: ItemSize,
  order: Prisma.Sql,
  opts: BudgetOptions = {},
): Prisma.Sql {
  if (cut === "walk") return budgeted(page, size, order, opts);
  return Prisma.sql`
    SELECT q.* FROM (SELECT p.*, sum(${size.ub}) OVER () AS "_ubAll" FROM (${page}) p) q
     WHERE q."_ubAll" <= ${big(opts.budget ?? ITEMS_BUDGET_BYTES)}`;
}

/**
 * A page within the budget: `read("gate")` — the common page, one statement — and, when `refused`
 * says that gate withheld rows the page should have had (it came back empty where rows were due),
 * `read("walk")`.
 */
/** For cutToBudget() over a listStatement(): no row of the page came, though `offset` is below the total. */
export const withheld = (rows: { id: unknown; total: number }[], offset: number) =>
  rows.every((r) => r.id === null) && offset < Number(rows[0]?.total ?? 0);

export async function cutToBudget<T>(read: (cut: Cut) => Promise<T>, refused: (gated: T) => boolean): Promise<T> {
  const gated = await read("gate");
  return refused(gated) ? read("walk") : gated;
}

export interface BudgetOptions {
  /** Bytes the kept rows may take (default ITEMS_BUDGET_BYTES). */
  budget?: number;
  /** Also compute "_fetched": how many rows the page had before the cut (a cut page keeps fewer). */
  fetched?: boolean;
}

/**
 * The rows of `page` (a SELECT) that fit the budget: the longest prefix in `order` (unqualified
 * column names of the page, unique: e.g. `"createdAt" DESC, "id" DESC`) whose sizes sum to at most
 * the budget, and always the first row. The columns are the page's own plus "_rn" (1, 2, … in
 * `order`), "_size" (the bytes the row was counted at), "_ub", "_ubAll" and, when asked, "_fetched";
 * in no particular order: the caller orders them. `size` is written over the page's columns as
 * `p."name"` (pageCol). One statement, evaluated where it is embedded (a LATERAL page of
 * listStatement() included).
 *
 * `p`: the page's rows, numbered, each with its ub and the sum of them all. When that sum is within
 * the budget (a common page), every row is kept at its ub and nothing else runs. Otherwise `walk`
 * goes down the rows in order adding each one's exact size, and stops at the first row past the
 * budget: exact sizes are computed for the rows returned and one more, never for the rest (the
 * worst ticket page reads the texts of five threads, not two hundred). The page's rows stay as
 * they are in `p` (a large text is not read unless the row is walked or returned). OFFSET 0 keeps
 * each walked row's exact size one computation (a pulled-up subquery would be evaluated per use).
 */
export function budgeted(page: Prisma.Sql, size: ItemSize, order: Prisma.Sql, opts: BudgetOptions = {}): Prisma.Sql {
  const b = big(opts.budget ?? ITEMS_BUDGET_BYTES);
  const fetched = opts.fetched ? Prisma.sql`, count(*) OVER () AS "_fetched"` : Prisma.empty;
  return Prisma.sql`
    SELECT k.* FROM (
      WITH RECURSIVE
        p AS (SELECT p.*, row_number() OVER w AS "_rn", ${size.ub} AS "_ub", sum(${size.ub}) OVER () AS "_ubAll" ${fetched}
                FROM (${page}) p WINDOW w AS (ORDER BY ${order} ROWS UNBOUNDED PRECEDING)),
        walk AS (
          SELECT p."_rn", x."size" AS "_size", x."size" AS "_run"
            FROM p CROSS JOIN LATERAL (SELECT ${size.exact} AS "size" OFFSET 0) x
           WHERE p."_rn" = 1 AND p."_ubAll" > ${b}
          UNION ALL
          SELECT p."_rn", x."size", w."_run" + x."size"
            FROM walk w JOIN p ON p."_rn" = w."_rn" + 1 CROSS JOIN LATERAL (SELECT ${size.exact} AS "size" OFFSET 0) x
           WHERE w."_run" <= ${b})
      SELECT p.*, p."_ub" AS "_size" FROM p WHERE p."_ubAll" <= ${b}
      UNION ALL
      SELECT p.*, w."_size" FROM walk w JOIN p ON p."_rn" = w."_rn" WHERE w."_rn" = 1 OR w."_run" <= ${b}) k`;
}
