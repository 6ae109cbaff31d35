// The byte budget of every list page (issue 25, point 4): tickets with their threads, conversations,
// messages, leads, contacts, appointments and the changes feed. A page holds at most `limit` items and
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
import { toAppointment, APPOINTMENT_STATUSES } from "../appointments/schemas.js";
import { toContact } from "../contacts/schemas.js";
import { CHANNEL_KINDS, CONVERSATION_STATUSES, fromConversationRow, toMessage } from "../conversations/schemas.js";
import { toLead } from "../leads/schemas.js";
import { TICKET_STATUSES, toTicket, toTicketComment } from "../tickets/schemas.js";

/** The most bytes of JSON a list response body holds (any list; at least one item always comes). */
export const PAGE_BUDGET_BYTES = 4 * 1024 * 1024;
/** Kept for the envelope around the items: `total`, `pagination`, cursors (under 400 bytes), tRPC's `{"result":{"data":…}}`. */
export const ENVELOPE_BYTES = 1024;
/** What the items of one page may take. */
export const ITEMS_BUDGET_BYTES = PAGE_BUDGET_BYTES - ENVELOPE_BYTES;

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

// ---- the fixed parts: the JSON of a sample item whose texts are empty, every other field at its longest

const UUID = "ffffffff-ffff-ffff-ffff-ffffffffffff";
const ISO = "2026-11-20T08:00:00.000Z"; // every instant the API returns is 24 characters (years 0001–9999)
const INT_MIN = -2_147_483_648; // the longest int4 in JSON
const longest = (values: readonly string[]) => values.reduce((a, b) => (b.length > a.length ? b : a));

/**
 * Bytes of `sample` as JSON, less the two quotes (or brackets) of each of its `empty` text fields
 * (their sizes count them), plus one separating comma.
 */
export function fixedBytes(sample: unknown, empty: number): number {
  return Buffer.byteLength(JSON.stringify(sample)) - 2 * empty + 1;
}

export const FIXED = {
  lead: fixedBytes(
    toLead({
      id: UUID, customerId: UUID, conversationId: UUID, customerName: "", customerEmail: "", customerPhone: "", intent: "", quality: "",
      stageId: UUID, budgetMin: INT_MIN, budgetMax: INT_MIN, zones: [], rooms: INT_MIN, assignedOperatorId: UUID, source: "", notes: "",
      createdAt: ISO, updatedAt: ISO,
    }),
    8,
  ),
  contact: fixedBytes(
    toContact({
      id: UUID, fullName: "", phone: "", email: "", country: "", phoneVerifiedAt: ISO, emailVerifiedAt: ISO, marketingOptOut: false,
      marketingOptOutAt: ISO, origin: "", createdAt: ISO,
    }),
    5,
  ),
  conversation: fixedBytes(
    fromConversationRow({
      id: UUID, channelId: UUID, status: longest(CONVERSATION_STATUSES) as "escalated", subject: "", assignedOperatorId: UUID, lastMessagePreview: "",
      lastMessageAt: ISO, createdAt: ISO, channelKind: longest(CHANNEL_KINDS), customerRowId: UUID, customerName: "", customerEmail: "",
      customerPhone: "", customerContactId: UUID,
    }),
    5,
  ),
  appointment: fixedBytes(
    toAppointment({
      id: UUID, assignedUserId: UUID, customerId: UUID, conversationId: UUID, leadId: UUID, title: "", appointmentType: "", startsAt: ISO,
      endsAt: ISO, status: longest(APPOINTMENT_STATUSES) as "scheduled", source: "", notes: "", createdAt: ISO, updatedAt: ISO,
    }),
    4,
  ),
  message: fixedBytes(
    toMessage({ id: UUID, conversationId: UUID, role: "assistant", content: "", deliveryStatus: "delivered", createdAt: new Date(ISO) }),
    1,
  ),
  /** A ticket without its comments (`"comments":[]` included). */
  ticket: fixedBytes(
    toTicket({
      id: UUID, customerId: UUID, leadId: UUID, conversationId: UUID, subject: "", status: longest(TICKET_STATUSES) as "resolved", createdById: UUID,
      assignedToId: UUID, createdAt: ISO, updatedAt: ISO, comments: [],
    }),
    1,
  ),
  /** One comment of a thread, without its body. */
  comment: fixedBytes(toTicketComment({ id: UUID, authorUserId: UUID, body: "", createdAt: ISO }), 1),
};

// ---- each list's item, over the columns of its page row

export const leadSize = (col: Col = pageCol): ItemSize =>
  sum(FIXED.lead, [
    ...["customerName", "customerEmail", "customerPhone", "intent", "quality", "source", "notes"].map((n) => text(col(n))),
    textArray(col("zones")),
  ]);

export const contactSize = (col: Col = pageCol): ItemSize =>
  sum(FIXED.contact, ["fullName", "phone", "email", "country", "origin"].map((n) => text(col(n))));

/** A conversation, over selectConversations()'s columns (its customer's fields included). */
export const conversationSize = (col: Col = pageCol): ItemSize =>
  sum(FIXED.conversation, ["subject", "lastMessagePreview", "customerName", "customerEmail", "customerPhone"].map((n) => text(col(n))));

export const appointmentSize = (col: Col = pageCol): ItemSize =>
  sum(FIXED.appointment, ["title", "appointmentType", "source", "notes"].map((n) => text(col(n))));

export const messageSize = (col: Col = pageCol): ItemSize => sum(FIXED.message, [text(col("content"))]);

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
export function budgetCut(cut: Cut, page: Prisma.Sql, size: ItemSize, order: Prisma.Sql, opts: BudgetOptions = {}): Prisma.Sql {
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
export const withheld = (rows: { id: unknown; total: number }[], offset: number) => rows.every((r) => r.id === null) && offset < Number(rows[0]?.total ?? 0);

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
