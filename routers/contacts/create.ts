// POST /public/v1/contacts — create a contact.
//   1. body strict (unknown fields, `origin` included → 422); phone 1–40 characters, required
//   2. phone → E.164 with the region of `country`, else the tenant's default country (else 422,
//      also beyond E.164's 15 digits: server/phone.ts)
//   3. origin stamped `api`
//   4. phone / email (case-insensitive) already used by a live or soft-deleted contact of the tenant
//      → 409 ALREADY_EXISTS, held by the unique indexes (so concurrent creates cannot both win)
import { z } from "zod";
import { insertRowReturning } from "../../server/db/insert.js";
import { Contact, ContactObject, toContact } from "../../model/contact.js";
import type { ModelOf } from "../../model/row.js";
import { idempotent } from "../_lib/idempotent.js";
import { ExternalId } from "../_lib/sync.js";
import { scoped, type AuthedContext } from "../trpc.js";
import { contactRow } from "./model.js";
import { Country, duplicateContact, Email, FullName, RawPhone } from "./schemas.js";

export const CreateContactInput = z
  .object({
    fullName: FullName.optional(),
    phone: RawPhone,
    email: Email.optional(),
    country: Country.optional(),
    externalId: ExternalId.nullable().optional(),
  })
  .strict();
type CreateContactInput = z.infer<typeof CreateContactInput>;

export const createContact = scoped("tenant:contacts.manage")
  .meta({
    errors: ["ALREADY_EXISTS"],
    openapi: {
      method: "POST",
      path: "/public/v1/contacts",
      tags: ["contacts"],
      summary: "Create a contact",
      description:
        "The phone is normalized to E.164 (region from `country`, else the tenant's default country). " +
        "A phone, email (case-insensitive) or externalId already used by a live or soft-deleted contact gives 409 ALREADY_EXISTS " +
        "naming the contact in `details.existingId`. " +
        "`origin` is always `api` and cannot be sent. Accepts `Idempotency-Key`.",
      protect: true,
    },
    successStatus: 201,
    location: "/public/v1/contacts/{id}",
  })
  .input(CreateContactInput)
  .output(ContactObject)
  .mutation(idempotent<CreateContactInput, ContactObject>(({ ctx, input }) => insertContact(ctx, input)));

/** The create's rules and its one INSERT of the row (model.ts; also the create of an upsert by external id). */
export async function insertContact(ctx: AuthedContext, input: CreateContactInput): Promise<ContactObject> {
  const row = contactRow(ctx, input);
  // The answer is the row as stored: its updatedAt is the database's (the "row_touch" trigger).
  const stored = await insertRowReturning<ModelOf<typeof Contact>>(
    ctx.db,
    { table: "Contact", row },
    Contact.select(),
  ).catch((err) => duplicateContact(err, ctx.tenantId, row));
  return toContact(stored);
}
