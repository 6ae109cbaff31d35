// PATCH /public/v1/contacts/{contact_id} — partial update of fullName, email, marketingOptOut, externalId.
//   1. body strict (any other field → 422); a malformed If-Match → 422
//   2. unknown, foreign or soft-deleted contact → 404
//   3. If-Match naming none of the contact's versions → 412 PRECONDITION_FAILED (routers/_lib/sync.ts)
//   4. email and externalId still unique per tenant (live and deleted; email case-insensitive) →
//      409 ALREADY_EXISTS naming the holder in details.existingId
//   5. marketingOptOut true stamps marketingOptOutAt (when it was false); false clears it
//   One UPDATE statement, only while the contact is live (and, with If-Match, still at the version
//   checked): a failed PATCH changes nothing. {} or values equal to the stored ones write nothing.
import { z } from "zod";
import { ContactObject, toContact } from "../../model/contact.js";
import { BodyBool, Id } from "../_lib/schemas.js";
import { checkVersion, ExternalId, missedWrite, preconditionOf, versionGuard, type EntityTags } from "../_lib/sync.js";
import { mustExist, owned } from "../_lib/tenant.js";
import { scoped, type AuthedContext } from "../trpc.js";
import { duplicateContact, Email, FullName } from "./schemas.js";

export const UpdateContactInput = z
  .object({
    contact_id: Id,
    fullName: FullName.nullable().optional(),
    email: Email.nullable().optional(),
    marketingOptOut: BodyBool.optional(),
    externalId: ExternalId.nullable().optional(),
  })
  .strict();

type ContactPatch = Omit<z.output<typeof UpdateContactInput>, "contact_id">;
type StoredContact = {
  id: string;
  fullName: string | null;
  email: string | null;
  marketingOptOut: boolean;
  externalId: string | null;
  version: number;
};

export const updateContact = scoped("tenant:contacts.manage")
  .meta({
    errors: ["NOT_FOUND", "ALREADY_EXISTS", "PRECONDITION_FAILED"],
    openapi: {
      method: "PATCH",
      path: "/public/v1/contacts/{contact_id}",
      tags: ["contacts"],
      summary: "Update a contact",
      description:
        "Optional fields: fullName, email (null clears), marketingOptOut (true stamps marketingOptOutAt, false clears it), externalId (null clears). " +
        "An email or externalId used by another contact (live or deleted; email case-insensitive) gives 409 ALREADY_EXISTS naming it in " +
        "`details.existingId`. Accepts `If-Match`: when it names no current version, 412 PRECONDITION_FAILED with the current `ETag`, and nothing is written.",
      protect: true,
    },
  })
  .input(UpdateContactInput)
  .output(ContactObject)
  .mutation(async ({ ctx, input }) => {
    const { contact_id, ...patch } = input;
    const pre = preconditionOf(ctx);
    const current = await mustExist(
      ctx.db.contact.findFirst({ where: owned(ctx, { id: contact_id, deletedAt: null }) }),
      "Contact",
    );
    checkVersion(pre, current.version);
    return toContact(await writeContact(ctx, current, patch, pre));
  });

/**
 * The PATCH-able fields of `patch` that differ from `current`, written in one UPDATE while the
 * contact is live (and, with If-Match, still at the version read); the row as it is then. Nothing
 * differs: nothing is written. Also the update of an upsert by external id (routers/contacts/upsert.ts).
 */
export async function writeContact<R extends StoredContact>(
  ctx: AuthedContext,
  current: R,
  patch: ContactPatch,
  pre: EntityTags | undefined,
) {
  const now = ctx.services.now();
  const data = {
    ...(patch.fullName !== undefined && patch.fullName !== current.fullName ? { fullName: patch.fullName } : {}),
    ...(patch.email !== undefined && patch.email !== current.email ? { email: patch.email } : {}),
    ...(patch.marketingOptOut === true && !current.marketingOptOut
      ? { marketingOptOut: true, marketingOptOutAt: now }
      : {}),
    ...(patch.marketingOptOut === false && current.marketingOptOut
      ? { marketingOptOut: false, marketingOptOutAt: null }
      : {}),
    ...(patch.externalId !== undefined && patch.externalId !== current.externalId
      ? { externalId: patch.externalId }
      : {}),
  };
  if (Object.keys(data).length === 0) return current;
  const where = owned(ctx, { id: current.id, deletedAt: null, ...versionGuard(pre, current.version) });
  // No updatedAt: the database moves it with the write (the "row_touch" trigger).
  const rows = await ctx.db.contact
    .updateManyAndReturn({ where, data })
    .catch((err) => duplicateContact(err, ctx.tenantId, data));
  return (
    rows[0] ??
    (await missedWrite(ctx.db.contact.findFirst({ where: owned(ctx, { id: current.id, deletedAt: null }) }), "Contact"))
  );
}
