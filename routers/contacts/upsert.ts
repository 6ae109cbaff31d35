// PUT /public/v1/contacts/by-external-id/{externalId} — create or update the contact holding an
// external id (scope tenant:contacts.manage; routers/_lib/upsert.ts for the mechanism).
//   body: POST /contacts's body without externalId. No contact holds it → created as POST creates it
//   (201, Location; a phone or email another contact holds → 409 naming it). One holds it → fullName
//   and email applied as PATCH applies them (200); phone (compared after normalisation) and country
//   must be absent or equal to the stored values, else 422 naming them; nothing differs → 200, nothing
//   written. A soft-deleted contact still holds its external id: 409 ALREADY_EXISTS naming it.
import { z } from "zod";
import { requirePhone } from "../../server/phone.js";
import { ContactObject, toContact } from "../../model/contact.js";
import { alreadyExists, checkVersion } from "../_lib/sync.js";
import { owned } from "../_lib/tenant.js";
import { PathExternalId, putMeta, putResolver, type UpsertResource } from "../_lib/upsert.js";
import { scoped, type AuthedContext } from "../trpc.js";
import { mayNotChange } from "../leads/upsert.js";
import { CreateContactInput, insertContact } from "./create.js";
import { writeContact } from "./update.js";

export const ContactUpsertBody = CreateContactInput.omit({ externalId: true });
type Body = z.output<typeof ContactUpsertBody>;
export const ContactUpsertItem = ContactUpsertBody.extend(PathExternalId);
type Stored = NonNullable<Awaited<ReturnType<AuthedContext["db"]["contact"]["findFirst"]>>>;

export const contactUpserts: UpsertResource<Body, Stored, ContactObject> = {
  table: "Contact",
  plural: "contacts",
  item: ContactUpsertItem,
  find: (ctx, externalId) => ctx.db.contact.findFirst({ where: owned(ctx, { externalId }) }),
  create: (ctx, body, externalId) => insertContact(ctx, { ...body, externalId }),
  async update(ctx, contact, body, pre) {
    if (contact.deletedAt) throw alreadyExists("Contact", "externalId", contact.id);
    const differs: string[] = [];
    const phone = requirePhone(body.phone, body.country ?? contact.country ?? ctx.caller.tenant.defaultCountry, "phone");
    if (phone !== contact.phone) differs.push("phone");
    if (body.country !== undefined && body.country !== contact.country) differs.push("country");
    if (differs.length) throw mayNotChange(differs);
    checkVersion(pre, contact.version);
    const row = await writeContact(ctx, contact, { fullName: body.fullName, email: body.email }, pre);
    return row === contact ? null : toContact(row);
  },
  toPublic: (row) => toContact(row),
};

export const upsertContact = scoped("tenant:contacts.manage")
  .meta({
    errors: ["ALREADY_EXISTS", "PRECONDITION_FAILED"],
    upsert: true,
    idempotent: true,
    openapi: putMeta({
      plural: "contacts",
      tag: "contacts",
      summary: "Create or update a contact by your external id",
      description:
        "The body is POST /contacts's without `externalId` (the path holds it, URL-encoded). No contact holds the external id: the contact is " +
        "created exactly as POST creates it (201, `Location`; a phone or email another contact holds gives 409 naming it in `details.existingId`). " +
        "One does: `fullName` and `email` are applied as PATCH applies them (200); `phone` (compared after normalisation) and `country` must be " +
        "absent or equal to the stored values, else 422 naming them, with nothing written; when nothing would change, 200 and nothing is written. " +
        "A deleted contact keeps its external id: 409 ALREADY_EXISTS naming it. Concurrent PUTs of one external id create one contact between " +
        "them. Accepts `If-Match` (on an update; with no contact, 412) and `Idempotency-Key`.",
    }),
  })
  .input(ContactUpsertItem)
  .output(ContactObject)
  .mutation(putResolver(contactUpserts));
