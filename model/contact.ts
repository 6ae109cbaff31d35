// Contact: the public object, its row and the mapper between them.
import { z } from "zod";
import { Timestamp, UPDATED_AT } from "./instants.js";
import { col, defineRow, type RowOf } from "./row.js";

export const ContactObject = z
  .object({
    id: z.string(),
    fullName: z.string().nullable(),
    phone: z.string().nullable(),
    email: z.string().nullable(),
    country: z.string().nullable(),
    phoneVerifiedAt: Timestamp.nullable(),
    emailVerifiedAt: Timestamp.nullable(),
    marketingOptOut: z.boolean(),
    marketingOptOutAt: Timestamp.nullable(),
    origin: z.string(),
    externalId: z
      .string()
      .nullable()
      .meta({ description: "the integrator's own id, unique per tenant within the resource; null when none" }),
    version: z
      .number()
      .int()
      .meta({ description: "1 on create, +1 with every write that changes the object; sent as the ETag" }),
    createdAt: Timestamp,
    updatedAt: Timestamp.meta({ description: UPDATED_AT }),
  })
  .meta({ id: "Contact" });
export type ContactObject = z.infer<typeof ContactObject>;

export const Contact = defineRow("Contact", {
  id: col.uuid(),
  fullName: col.text().nullable(),
  phone: col.text().nullable(),
  email: col.text().nullable(),
  country: col.text().nullable(),
  phoneVerifiedAt: col.instant().nullable(),
  emailVerifiedAt: col.instant().nullable(),
  marketingOptOut: col.bool(),
  marketingOptOutAt: col.instant().nullable(),
  origin: col.text(),
  externalId: col.text().nullable(),
  version: col.int(),
  createdAt: col.instant(),
  updatedAt: col.instant(),
});
export type ContactRow = RowOf<typeof Contact>;

/** A contact row (or Prisma's Contact) → the public contact. */
export const toContact = Contact.toPublic(ContactObject, { composed: {} });
