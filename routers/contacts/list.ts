// GET /public/v1/contacts — list the tenant's live contacts, newest first (createdAt desc, id desc).
//   search   1–200 characters, case-insensitive substring of fullName, email or phone (LIKE
//            metacharacters match literally; a phone-like fragment also matches the phone's digits)
//   listId   members of that contact list only (unknown or foreign list → empty page)
//   offset, limit (common rule 1), or cursor: the opaque `nextCursor` of a previous page (keyset;
//            offset is then ignored). A malformed cursor → 422.
// Soft-deleted contacts are never listed. `nextCursor` is null on the last page.
import { z } from "zod";
import { Prisma } from "../../generated/prisma/client.js";
import { Id, OffsetList, offsetList, PageQuery } from "../_lib/schemas.js";
import { owned } from "../_lib/tenant.js";
import { scoped } from "../trpc.js";
import { ContactObject, CursorInput, encodeCursor, toContact, type ContactCursor, type ContactRow } from "./schemas.js";

export const ListContactsQuery = z.object({
  search: z
    .string()
    .min(1)
    .max(200)
    .describe("Case-insensitive substring of fullName, email or phone; % and _ match literally.")
    .optional(),
  listId: Id.describe("Only members of this contact list (unknown list → empty page).").optional(),
  cursor: CursorInput.optional(),
  ...PageQuery,
});

export const ContactList = OffsetList(ContactObject).extend({
  nextCursor: z
    .string()
    .nullable()
    .describe("Opaque keyset cursor for the next page (pass it back as `cursor`), or null on the last page."),
});

/** LIKE metacharacters escaped with the default escape character (backslash). */
const escapeLike = (s: string) => s.replace(/[\\%_]/g, "\\$&");

function searchWhere(search: string): Prisma.ContactWhereInput {
  const like = { contains: escapeLike(search), mode: "insensitive" as const };
  const or: Prisma.ContactWhereInput[] = [{ fullName: like }, { email: like }, { phone: like }];
  // "612 345", "(612) 345-678", "+34 612": also match the digits against the stored E.164 phone.
  const digits = search.replace(/\D/g, "");
  if (digits && digits !== search && /^[\d\s().+-]+$/.test(search)) or.push({ phone: { contains: digits } });
  return { OR: or };
}

/**
 * The same filters as SQL, for the page of a search with few matches (see SMALL_SEARCH): the matches
 * are read through the trigram index first and only then sorted. Left to itself the planner often
 * walks the (tenantId, createdAt) index instead and, when the matches are few or all old, reads
 * every contact of the tenant to fill a page.
 */
function searchSql(ctx: { tenantId: string }, input: { search: string; listId?: string }, cursor: ContactCursor | undefined): Prisma.Sql {
  const like = escapeLike(input.search);
  const or = [
    Prisma.sql`"fullName" ILIKE ('%' || ${like} || '%')`,
    Prisma.sql`"email" ILIKE ('%' || ${like} || '%')`,
    Prisma.sql`"phone" ILIKE ('%' || ${like} || '%')`,
  ];
  const digits = input.search.replace(/\D/g, "");
  if (digits && digits !== input.search && /^[\d\s().+-]+$/.test(input.search)) or.push(Prisma.sql`"phone" LIKE ('%' || ${digits} || '%')`);
  const and = [Prisma.sql`c."tenantId" = ${ctx.tenantId}::uuid`, Prisma.sql`c."deletedAt" IS NULL`, Prisma.sql`(${Prisma.join(or, " OR ")})`];
  if (input.listId !== undefined)
    and.push(Prisma.sql`EXISTS (SELECT 1 FROM "ContactListMember" m
      WHERE m."tenantId" = c."tenantId" AND m."contactId" = c."id" AND m."listId" = ${input.listId}::uuid)`);
  if (cursor) {
    const at = cursor.createdAt.toISOString();
    and.push(Prisma.sql`(c."createdAt" < ${at}::timestamptz OR (c."createdAt" = ${at}::timestamptz AND c."id" < ${cursor.id}::uuid))`);
  }
  return Prisma.join(and, " AND ");
}

/** Up to this many matches, a search page is read through searchSql (all matches, then sorted). */
const SMALL_SEARCH = 2000;

/** Rows strictly after the cursor in (createdAt desc, id desc) order. */
const after = (c: ContactCursor): Prisma.ContactWhereInput => ({
  OR: [{ createdAt: { lt: c.createdAt } }, { createdAt: c.createdAt, id: { lt: c.id } }],
});

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
        "A malformed cursor gives 422.",
      protect: true,
    },
  })
  .input(ListContactsQuery)
  .output(ContactList)
  .query(async ({ ctx, input }) => {
    const where: Prisma.ContactWhereInput = owned(ctx, {
      deletedAt: null,
      AND: [
        ...(input.search !== undefined ? [searchWhere(input.search)] : []),
        ...(input.listId !== undefined ? [{ memberships: { some: { listId: input.listId } } }] : []),
      ],
    });
    const cursor = input.cursor;
    const [total, before] = await Promise.all([
      ctx.db.contact.count({ where }),
      // With a cursor, the page's offset is the number of rows at or before the cursor position.
      cursor ? ctx.db.contact.count({ where: { AND: [where, { NOT: after(cursor) }] } }) : Promise.resolve(input.offset),
    ]);
    const skip = cursor ? 0 : input.offset;
    // Rows left after the cursor (or the offset): none → no page query at all.
    const left = total - (cursor ? before : input.offset);
    const rows: ContactRow[] =
      left <= 0
        ? []
        : input.search !== undefined && left <= SMALL_SEARCH
          ? await ctx.db.$queryRaw<ContactRow[]>`
              SELECT "id", "fullName", "phone", "email", "country", "phoneVerifiedAt", "emailVerifiedAt", "marketingOptOut",
                     "marketingOptOutAt", "origin", "createdAt"
                FROM (SELECT * FROM "Contact" c WHERE ${searchSql(ctx, { search: input.search, listId: input.listId }, cursor)} OFFSET 0) m
               ORDER BY "createdAt" DESC, "id" DESC
               LIMIT ${input.limit + 1} OFFSET ${skip}`
          : await ctx.db.contact.findMany({
              where: cursor ? { AND: [where, after(cursor)] } : where,
              orderBy: [{ createdAt: "desc" }, { id: "desc" }],
              skip,
              take: input.limit + 1,
            });
    const more = rows.length > input.limit;
    const page = rows.slice(0, input.limit);
    const last = page[page.length - 1];
    return {
      ...offsetList(page.map(toContact), total, { offset: before, limit: input.limit }),
      nextCursor: more && last ? encodeCursor(last) : null,
    };
  });
