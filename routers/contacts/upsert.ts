// PUT /public/v1/contacts/by-external-id/{externalId} — create or update the contact holding an
// external id (scope tenant:contacts.manage; routers/_lib/upsert.ts for the mechanism).
//   body: POST /contacts's body without externalId. No contact holds it → created as POST creates it
//   (201, Location; a phone or email another contact holds → 409 naming it). One holds it → fullName
//   and email applied as PATCH applies them (200); phone (compared after normalisation) and country
//   must be absent or equal to the stored values, else 422 naming them; nothing differs → 200, nothing
//   written. A soft-deleted contact still holds its external id: 409 ALREADY_EXISTS naming it.
import type { z } from "zod";
import { Prisma } from "../../generated/prisma/client.js";
import { insertRows, readFor } from "../../server/db/insert.js";
import { Contact, type ContactRow } from "../../model/contact.js";
import { requirePhone } from "../../server/phone.js";
import { ContactObject, toContact } from "../../model/contact.js";
import { alreadyExists, checkVersion } from "../_lib/sync.js";
import { owned } from "../_lib/tenant.js";
import {
  differingCreateOnly,
  mayNotChange,
  PathExternalId,
  putMeta,
  putResolver,
  type UpsertResource,
} from "../_lib/upsert.js";
import { scoped, type AuthedContext } from "../trpc.js";
import { CreateContactInput, insertContact } from "./create.js";
import { CONTACT_WRITES, contactRow } from "./model.js";
import { writeContact } from "./update.js";
import { duplicateContact } from "./schemas.js";

export const ContactUpsertBody = CreateContactInput.omit({ externalId: true });
type Body = z.output<typeof ContactUpsertBody>;
export const ContactUpsertItem = ContactUpsertBody.extend(PathExternalId);
type Stored = NonNullable<Awaited<ReturnType<AuthedContext["db"]["contact"]["findFirst"]>>>;

export const contactUpserts: UpsertResource<Body, Stored, ContactObject> = {
  table: "Contact",
  plural: "contacts",
  item: ContactUpsertItem,
  find: (ctx, externalIds) => ctx.db.contact.findMany({ where: owned(ctx, { externalId: { in: externalIds } }) }),
  create: (ctx, body, externalId) => insertContact(ctx, { ...body, externalId }),
  async update(ctx, contact, body, pre) {
    if (contact.deletedAt) throw alreadyExists("Contact", "externalId", contact.id);
    const differs = differingCreateOnly(CONTACT_WRITES.createOnly, ctx, contact, body);
    if (differs.length) throw mayNotChange(differs);
    checkVersion(pre, contact.version);
    const row = await writeContact(ctx, contact, { fullName: body.fullName, email: body.email }, pre);
    return row === contact ? null : toContact(row);
  },
  toPublic: (row) => toContact(row),
  // PUT's common update in one statement on the raw runner: the live contact holding the external id,
  // its phone and country equal to the body's as the general path compares them, If-Match naming its
  // version, and fullName or email differing. No row: the general path answers (404s, 422s, 412s, unchanged).
  async fastUpdate(ctx, externalId, body, pre) {
    if (pre && !pre.any && pre.strong.length === 0) return undefined;
    let phone: string;
    try {
      phone = requirePhone(body.phone, body.country ?? ctx.caller.tenant.defaultCountry, "phone");
    } catch {
      return undefined;
    }
    const fn = body.fullName !== undefined;
    const em = body.email !== undefined;
    if (!fn && !em) return undefined;
    const t = ctx.tenantId;
    // The country the general path normalises with is the body's, else the contact's, else the
    // tenant's: equal to the one used here when the body names it, when the contact has none or the
    // tenant's, or when the phone is international (+…), which no country changes.
    const tenantCountry = ctx.caller.tenant.defaultCountry;
    const countryCond =
      body.country !== undefined
        ? Prisma.sql`"country" = ${body.country}`
        : body.phone.trim().startsWith("+")
          ? Prisma.sql`true`
          : Prisma.sql`("country" IS NULL OR "country" = ${tenantCountry})`;
    const differs = [
      ...(fn ? [Prisma.sql`"fullName" IS DISTINCT FROM ${body.fullName}::text`] : []),
      ...(em ? [Prisma.sql`"email" IS DISTINCT FROM ${body.email}::text`] : []),
    ];
    const rows = await readFor(ctx.database, ctx.db, { isoTimes: true, tenant: t })<ContactRow>(Prisma.sql`
      UPDATE "Contact" SET
        "fullName" = ${fn ? Prisma.sql`${body.fullName}::text` : Prisma.sql`"fullName"`},
        "email" = ${em ? Prisma.sql`${body.email}::text` : Prisma.sql`"email"`}
       WHERE "tenantId" = ${t}::uuid AND "externalId" = ${externalId} AND "deletedAt" IS NULL AND "phone" = ${phone}
         AND ${countryCond}
         AND ${pre && !pre.any ? Prisma.sql`"version" = ANY(${pre.strong}::int[])` : Prisma.sql`true`}
         AND (${Prisma.join(differs, " OR ")})
      RETURNING ${Contact.select()}`).catch((err) => duplicateContact(err, t, { email: body.email }));
    return rows[0] ? toContact(rows[0]) : undefined;
  },
  // A batch's new contacts in one INSERT, each as POST /contacts creates it; a row a unique index
  // refuses (a phone, email or external id another contact holds, or an earlier item's) is skipped,
  // and so is an item whose phone does not parse: the per-item path answers for those.
  async createMany(ctx, items) {
    const rows = [];
    for (const { externalId, body } of items) {
      try {
        rows.push(contactRow(ctx, { ...body, externalId }));
      } catch {}
    }
    // One INSERT of the rows POST would write (model.ts contactRow), on ctx.db: a batch's transaction,
    // or (a batch without an Idempotency-Key) the root client, where the statement commits on its own
    // through the raw runner. (On Citus an INSERT … SELECT is planned on the coordinator and its rows
    // sent to the tenant's shard; a refusal keeps its SQLSTATE there.)
    const inserted = await insertRows<ContactRow>(
      readFor(ctx.database, ctx.db, { isoTimes: true, tenant: ctx.tenantId }),
      ctx.db,
      "Contact",
      ctx.tenantId,
      rows,
      {
        conflict: "skip",
        returning: Contact.select(),
      },
    );
    const byExternalId = new Map(items.map((i) => [i.externalId, i.index]));
    return new Map(inserted.map((row) => [byExternalId.get(row.externalId!)!, toContact(row)]));
  },
};

export const upsertContact = scoped("tenant:contacts.manage")
  .meta({
    errors: ["ALREADY_EXISTS", "PRECONDITION_FAILED"],
    upsert: true,
    location: "/public/v1/contacts/{id}",
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
