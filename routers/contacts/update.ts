// PATCH /public/v1/contacts/{contact_id} — partial update of fullName, email, marketingOptOut.
//   1. body strict (any other field → 422)
//   2. unknown, foreign or soft-deleted contact → 404
//   3. email still unique per tenant (live and deleted, case-insensitive) → 409 ALREADY_EXISTS
//   4. marketingOptOut true stamps marketingOptOutAt (when it was false); false clears it
//   One UPDATE statement: a failed PATCH changes nothing. {} changes nothing and returns the contact.
import { z } from "zod";
import { notFound } from "../../server/errors.js";
import { ContactObject, toContact } from "../../model/contact.js";
import { BodyBool, Id } from "../_lib/schemas.js";
import { mustExist, owned } from "../_lib/tenant.js";
import { scoped } from "../trpc.js";
import { duplicateContact, Email, FullName } from "./schemas.js";

export const UpdateContactInput = z
  .object({
    contact_id: Id,
    fullName: FullName.nullable().optional(),
    email: Email.nullable().optional(),
    marketingOptOut: BodyBool.optional(),
  })
  .strict();

export const updateContact = scoped("tenant:contacts.manage")
  .meta({
    errors: ["NOT_FOUND", "ALREADY_EXISTS"],
    openapi: {
      method: "PATCH",
      path: "/public/v1/contacts/{contact_id}",
      tags: ["contacts"],
      summary: "Update a contact",
      description:
        "Optional fields: fullName, email (null clears), marketingOptOut (true stamps marketingOptOutAt, false clears it). " +
        "An email used by another contact (live or deleted, case-insensitive) gives 409 ALREADY_EXISTS.",
      protect: true,
    },
  })
  .input(UpdateContactInput)
  .output(ContactObject)
  .mutation(async ({ ctx, input }) => {
    const { contact_id, ...patch } = input;
    const live = owned(ctx, { id: contact_id, deletedAt: null });
    const current = await mustExist(ctx.db.contact.findFirst({ where: live }), "Contact");
    if (patch.fullName === undefined && patch.email === undefined && patch.marketingOptOut === undefined) return toContact(current);

    const now = ctx.services.now();
    const data = {
      ...(patch.fullName !== undefined ? { fullName: patch.fullName } : {}),
      ...(patch.email !== undefined ? { email: patch.email } : {}),
      ...(patch.marketingOptOut === true && !current.marketingOptOut ? { marketingOptOut: true, marketingOptOutAt: now } : {}),
      ...(patch.marketingOptOut === false ? { marketingOptOut: false, marketingOptOutAt: null } : {}),
      updatedAt: now,
    };
    const { count } = await ctx.db.contact.updateMany({ where: live, data }).catch(duplicateContact);
    if (count === 0) throw notFound("Contact"); // soft-deleted in between
    return toContact(await mustExist(ctx.db.contact.findFirst({ where: owned(ctx, { id: contact_id }) }), "Contact"));
  });
