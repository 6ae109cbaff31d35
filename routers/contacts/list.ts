// GET /public/v1/contacts — list the tenant's live contacts, newest first (createdAt desc, id desc).
//   search   1–200 characters, case-insensitive substring of fullName, email or phone (LIKE
//            metacharacters match literally; a phone-like fragment also matches the phone's digits)
//   listId   members of that contact list only (unknown or foreign list → empty page)
//   offset, limit (common rule 1), or cursor: the opaque `nextCursor` of a previous page (keyset;
//            offset is then ignored). A malformed cursor → 422.
//   sort, updatedFrom/updatedTo, id/externalId lists: the pieces every list takes (routers/_lib/list.ts).
// Soft-deleted contacts are never listed. `nextCursor` is null on the last page.
// Two readers answer the same list: the list declaration (contactList, routers/_lib/list.ts), and
// for the requests of the list's first form (default order, one external id at most, no update-time
// window or ids) the search walk below, which keeps that form's cursor (base64url of createdAt|id);
// test/db/list-sync.test.ts compares the two.
import { z } from "zod";
import { Prisma } from "../../generated/prisma/client.js";
import { Contact, ContactObject, toContact, type ContactRow } from "../../model/contact.js";
import { toIso, type Iso } from "../../model/instants.js";
import { budgetCut, contactSize, OFFSET_BUDGET_DOC, withheld, type Cut } from "../_lib/page-budget.js";
import {
  defineList,
  ExternalIds,
  LIST_QUERY_DOC,
  ListEnvelopeExtras,
  ListQueryPieces,
  SortQuery,
  STABLE_BEFORE,
} from "../_lib/list.js";
import { Id, OffsetList, offsetList, PageQuery } from "../_lib/schemas.js";
import {
  CachedTotal,
  counted,
  counter,
  countedRange,
  exactTotal,
  listStatement,
  splitList,
  sqlTime,
  whereOf,
  type Filter,
  type Seek,
  listRows,
} from "../_lib/totals.js";
import { validation } from "../../server/errors.js";
import { scoped, type AuthedContext } from "../trpc.js";
import { decodeCursor, encodeCursor, type ContactCursor } from "./schemas.js";

const SORTS = ["createdAt", "updatedAt"] as const;

export const ListContactsQuery = z.object({
  search: z
    .string()
    .min(1)
    .max(200)
    .describe("Case-insensitive substring of fullName, email or phone; % and _ match literally.")
    .optional(),
  listId: Id.describe("Only members of this contact list (unknown list → empty page).").optional(),
  externalId: ExternalIds,
  sort: SortQuery(SORTS, "-createdAt"),
  ...ListQueryPieces,
  ...PageQuery,
});

export const ContactList = OffsetList(ContactObject).extend(ListEnvelopeExtras);

const live = Prisma.sql`"deletedAt" IS NULL`;

/** The contacts list (live contacts): every request but a search in the default order, which walks. */
export const contactList = defineList<ContactRow, z.infer<typeof ContactObject>>({
  entity: "Contact",
  order: { column: "createdAt", desc: true },
  sorts: SORTS,
  externalId: true,
  pick: Contact.select(),
  size: () => contactSize(),
  toPublic: toContact,
  always: [live],
});

/** LIKE metacharacters escaped with the default escape character (backslash). */
const escapeLike = (s: string) => s.replace(/[\\%_]/g, "\\$&");

/** "612 345", "(612) 345-678", "+34 612": a phone-looking search also matches its digits against the stored E.164 phone. */
function phoneDigits(search: string): string | undefined {
  const digits = search.replace(/\D/g, "");
  return digits && digits !== search && /^[\d\s().+-]+$/.test(search) ? digits : undefined;
}

/** The separator of the generated "searchText" column (lower(fullName) U+001F lower(email) U+001F lower(phone)). */
const UNIT_SEPARATOR = "\u001f";

/**
 * The search as SQL: a case-insensitive substring of fullName, email or phone, in two equal forms.
 * `index`: ILIKE, which the trigram GIN index serves (the count, and the small branch that reads every
 * match). `scan`: strpos over the generated "searchText" column, for the walk down
 * "Contact_search_walk_idx" that tests contact after contact until a page is full — an index-only
 * scan, one strpos per contact. The same rows: in a UTF-8 database ILIKE is LIKE over lower() of both
 * sides, a pattern '%s%' with s's metacharacters escaped is "contains s", lower() of a concatenation
 * is the concatenation of lower()s, and a search without U+001F cannot match across the separators
 * (one with it is tested column by column).
 */
export function searchCond(search: string, form: "index" | "scan"): Prisma.Sql {
  const digits = phoneDigits(search);
  if (form === "scan") {
    const or = search.includes(UNIT_SEPARATOR)
      ? [
          Prisma.sql`strpos(lower("fullName"), lower(${search})) > 0`,
          Prisma.sql`strpos(lower("email"), lower(${search})) > 0`,
          Prisma.sql`strpos(lower("phone"), lower(${search})) > 0`,
        ]
      : [Prisma.sql`strpos("searchText", lower(${search})) > 0`];
    if (digits) or.push(Prisma.sql`strpos("phone", ${digits}) > 0`);
    return Prisma.sql`(${Prisma.join(or, " OR ")})`;
  }
  const like = escapeLike(search);
  const or = [
    Prisma.sql`"fullName" ILIKE ('%' || ${like} || '%')`,
    Prisma.sql`"email" ILIKE ('%' || ${like} || '%')`,
    Prisma.sql`"phone" ILIKE ('%' || ${like} || '%')`,
  ];
  if (digits) or.push(Prisma.sql`"phone" LIKE ('%' || ${digits} || '%')`);
  return Prisma.sql`(${Prisma.join(or, " OR ")})`;
}

/**
 * Which way a search page is read, decided inside the statement from its numbers (a constant of the
 * row s: only one branch runs):
 * - `small`: every match left to list, through the trigram index, then sorted — ~4.5 µs a match;
 * - `walk`: down "Contact_search_walk_idx", newest first, testing each contact until the page is full —
 *   ~0.2 µs a contact; with the matches spread evenly, (offset + limit + 1) × live contacts / total of them.
 * The walk is taken when the matches left exceed SMALL_SEARCH (the small branch would read them all),
 * or when its expected length costs less than reading the matches: (before + take) × live <
 * WALK_PER_MATCH × total × (total − before). The walk runs only between the newest and the oldest
 * match's createdAt (CachedTotal's span, taken with the count): matches bunched among the older
 * contacts cost no walk through the newer ones. Matches spread thinly over the span make a walk longer
 * than expected; it is still bounded by the contacts inside the span at ~0.15 µs each.
 */
const SMALL_SEARCH = 2000;
const WALK_PER_MATCH = 20;

export const listContacts = scoped("tenant:contacts.read")
  .meta({
    openapi: {
      method: "GET",
      path: "/public/v1/contacts",
      tags: ["contacts"],
      summary: "List contacts",
      description:
        "Live contacts of the tenant, newest first. Offset pagination (`offset`, `limit`), or keyset pagination: " +
        "`nextCursor` (base64url of the last item's createdAt and id, null on the last page) passed back as the " +
        "`cursor` query parameter continues strictly after that item, and `offset` is then ignored. " +
        "A malformed cursor gives 422. " +
        OFFSET_BUDGET_DOC +
        " A page cut by the budget also has a `nextCursor`. " +
        LIST_QUERY_DOC,
      protect: true,
    },
  })
  .input(ListContactsQuery)
  .output(ContactList)
  .query(async ({ ctx, input }) => {
    const legacy = input.cursor === undefined ? null : decodeCursor(input.cursor);
    // Today's requests: the default order, at most one external id, no update-time window, no ids.
    const plain =
      input.sort === undefined &&
      input.updatedFrom === undefined &&
      input.updatedTo === undefined &&
      input.id === undefined &&
      !Array.isArray(input.externalId);
    if (legacy && !plain)
      throw validation("cursor: a cursor of the first form continues only the default order without the new filters", {
        fields: [
          {
            field: "cursor",
            code: "invalid_cursor",
            message: "start again without it, or use a nextCursor of this list",
          },
        ],
      });
    // Those keep their reader (and their cursor's form); the rest, and a cursor of the list's form, the declaration's.
    if (legacy || (plain && input.cursor === undefined)) return searchWalk(ctx, input, legacy ?? undefined);
    const { page } = await contactList.page(ctx, input, { filters: ownFilters(ctx.tenantId, input, "index") });
    return page;
  });

/** The search and list filters, in the form asked (searchCond). */
function ownFilters(t: string, input: ListContactsInput, form: "index" | "scan"): Filter[] {
  const filters: Filter[] = [];
  if (input.search !== undefined) filters.push({ cond: searchCond(input.search, form) });
  if (input.listId !== undefined)
    filters.push({
      cond: Prisma.sql`EXISTS (SELECT 1 FROM "ContactListMember" m
        WHERE m."tenantId" = ${t}::uuid AND m."contactId" = "Contact"."id" AND m."listId" = ${input.listId}::uuid)`,
      counter: counter(t, "Contact", "listId", "listId", input.listId),
    });
  return filters;
}

type ListContactsInput = z.infer<typeof ListContactsQuery>;

/**
 * A search in the default order, or a page after a cursor of the first form: the walk. One statement
 * (routers/_lib/totals.ts): the total (the live-contact counter, the list's counter, or a trigram
 * count of a search), the position of a cursor and the page. Without search and listId, a cursor's
 * position and a deep offset come from the createdAt day buckets.
 */
async function searchWalk(ctx: AuthedContext, input: ListContactsInput, cursor: ContactCursor | undefined) {
  const t = ctx.tenantId;
  const filters = ownFilters(t, input, "index");
  const scanFilters = ownFilters(t, input, "scan");
  if (input.externalId !== undefined) {
    // One external id at most here (`plain`).
    const byExternalId: Filter = { cond: Prisma.sql`"externalId" = ${input.externalId as string}` };
    filters.push(byExternalId);
    scanFilters.push(byExternalId);
  }
  const where = whereOf(t, filters, [live]);
  // The page's walk down (tenantId, createdAt) tests its rows with the scan form of a search.
  const whereScan = whereOf(t, scanFilters, [live]);
  const seek: Seek | undefined =
    filters.length === 0 ? { entity: "Contact", column: Prisma.sql`"createdAt"`, desc: true } : undefined;
  let after = Prisma.sql`true`;
  // The page's offset: with a cursor, the number of rows at or before the cursor position.
  let before = Prisma.sql`${input.offset}`;
  if (cursor) {
    const at = sqlTime(cursor.createdAt);
    after = Prisma.sql`("createdAt" < ${at} OR ("createdAt" = ${at} AND "id" < ${cursor.id}::uuid))`;
    const tied = Prisma.sql`"createdAt" = ${at} AND "id" >= ${cursor.id}::uuid`;
    before = seek
      ? // createdAt has millisecond precision: "newer than the cursor" is the range from 1 ms after it.
        Prisma.sql`${countedRange(t, { ...seek, lo: new Date(cursor.createdAt.getTime() + 1) })}
            + (SELECT count(*) FROM "Contact" WHERE ${where} AND ${tied})`
      : Prisma.sql`(SELECT count(*) FROM "Contact" WHERE ${where} AND NOT ${after})`;
  }
  const take = input.limit + 1;
  // A search's total counts its matches: cached under the contacts' version (CachedTotal), so that
  // paging through a search, or repeating it, counts them once per contact write, not per page.
  // The count also takes the matches' span of createdAt, kept beside it: the walk seeks to the newest
  // match and stops at the oldest.
  const cached =
    input.search !== undefined
      ? new CachedTotal(
          ctx.database,
          t,
          "Contact",
          JSON.stringify([
            input.search,
            input.listId ?? null,
            ...(input.externalId !== undefined ? [input.externalId] : []),
          ]),
          where,
        )
      : undefined;
  const read = (cut: Cut) =>
    listRows<ContactRow & { _fetched?: number | string }, { before: number; countVersion?: string; stableBefore: Iso }>(
      ctx,
      listStatement({
        tenantId: t,
        offset: cursor ? 0 : input.offset,
        total: cached ? cached.total : exactTotal(t, "Contact", filters, [live]),
        from: cached?.from,
        seek,
        extra: Prisma.sql`, (${before})::int AS "before"${STABLE_BEFORE}
          ${input.search !== undefined ? Prisma.sql`, (${counted(t, "Contact")})::bigint AS "live"` : Prisma.empty}
          ${cached ? cached.extra : Prisma.empty}`,
        // Cut to the byte budget (routers/_lib/page-budget.ts); "_fetched" (the walk's) tells a cut page
        // (fewer rows kept than read) from the last one.
        page: (at) =>
          budgetCut(cut, contactPage(at), contactSize(), Prisma.sql`"createdAt" DESC, "id" DESC`, {
            fetched: true,
            budget: ctx.pageBudget,
          }),
        order: Prisma.sql`p."createdAt" DESC, p."id" DESC`,
      }),
      // A search is planned for its pattern (the trigram index or the createdAt walk): never a
      // generic plan of a prepared statement, which cannot see the pattern.
      { prepare: input.search === undefined },
    );
  function contactPage(at: { where: Prisma.Sql; offset: Prisma.Sql }): Prisma.Sql {
    const plain = Prisma.sql`SELECT ${Contact.select()} FROM "Contact" WHERE ${whereScan} AND ${after} AND ${at.where}
        ORDER BY "createdAt" DESC, "id" DESC LIMIT ${take} OFFSET ${at.offset}`;
    if (cached === undefined) return plain;
    // The walk: ids only, so that it is an index-only scan of "Contact_search_walk_idx" (every
    // column it tests is in that index); then the page's rows by primary key.
    const walk = Prisma.sql`SELECT ${Contact.select()} FROM "Contact" WHERE "tenantId" = ${t}::uuid AND "id" IN (
          SELECT "id" FROM "Contact" WHERE ${whereScan} AND ${after} AND ${at.where} AND ${cached.span}
           ORDER BY "createdAt" DESC, "id" DESC LIMIT ${take} OFFSET ${at.offset})`;
    // Only one branch runs: the gate is a constant of the row of s.
    // Never NULL: with no value either branch would be skipped and the page come back empty.
    const small = Prisma.sql`COALESCE(s."total" - s."before" <= ${SMALL_SEARCH}
        AND (s."before" + ${take}::bigint) * s."live" >= ${WALK_PER_MATCH}::bigint * s."total" * (s."total" - s."before"), true)`;
    return Prisma.sql`
        SELECT * FROM (SELECT ${Contact.select()} FROM (SELECT * FROM "Contact" WHERE ${where} AND ${after} AND ${at.where} OFFSET 0) m
                        ORDER BY "createdAt" DESC, "id" DESC LIMIT ${take} OFFSET ${at.offset}) small
         WHERE ${small}
        UNION ALL
        SELECT * FROM (${walk}) large WHERE NOT ${small}`;
  }
  // The common page is the gate's; a page the gate withheld (it may reach the byte budget) is read
  // again as the walk (routers/_lib/page-budget.ts cutToBudget(), inline here for the count cache).
  let cut: Cut = "gate";
  let result = await read(cut);
  for (let again = 0; again < 4; again++) {
    // A cached search total read at another version than its own: again, with the count.
    if (cached && !cached.settle(result[0]!)) result = await read(cut);
    else if (cut === "gate" && withheld(result, Number(result[0]!.before))) {
      cut = "walk";
      result = await read(cut);
    } else break;
  }
  const { total: n, extra, items: rows } = splitList(result);
  // More: a row past the limit was read, or the budget cut the page.
  const more = rows.length > input.limit || (rows[0]?._fetched !== undefined && rows.length < Number(rows[0]._fetched));
  const page = rows.slice(0, input.limit);
  const last = page[page.length - 1];
  return {
    ...offsetList(page.map(toContact), n, { offset: extra.before, limit: input.limit }),
    nextCursor: more && last ? encodeCursor(last) : null,
    stableBefore: toIso(extra.stableBefore) as Iso,
  };
}
