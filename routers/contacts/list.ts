// GET /public/v1/contacts — list the tenant's live contacts, newest first (createdAt desc, id desc).
//   search   1–200 characters, case-insensitive substring of fullName, email or phone (LIKE
//            metacharacters match literally; a phone-like fragment also matches the phone's digits)
//   listId   members of that contact list only (unknown or foreign list → empty page)
//   offset, limit (common rule 1), or cursor: the opaque `nextCursor` of a previous page (keyset;
//            offset is then ignored). A malformed cursor → 422.
// Soft-deleted contacts are never listed. `nextCursor` is null on the last page.
import { z } from "zod";
import type { Prisma } from "../../generated/prisma/client.js";
import { Id, OffsetList, offsetList, PageQuery } from "../_lib/schemas.js";
import { owned } from "../_lib/tenant.js";
import { scoped } from "../trpc.js";
import { ContactObject, CursorInput, encodeCursor, toContact, type ContactCursor } from "./schemas.js";

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
    const rows = await ctx.db.contact.findMany({
      where: cursor ? { AND: [where, after(cursor)] } : where,
      orderBy: [{ createdAt: "desc" }, { id: "desc" }],
      skip: cursor ? 0 : input.offset,
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
