// Contacts' write model, stated once: the row a create stores (POST, PUT's create and a batch's bulk
// INSERT all build it here), what PATCH and PUT may change, what only a create sets (PUT compares it,
// 422 `immutable` when it differs), and the unique keys behind the 409s (schemas.ts duplicateContact).
import { randomUUID } from "node:crypto";
import type { ContactRow } from "../../model/contact.js";
import type { StoredRow } from "../../model/row.js";
import { requirePhone } from "../../server/phone.js";
import type { AuthedContext } from "../trpc.js";
import type { CreateOnly } from "../_lib/upsert.js";
import { EMAIL_KEY, PHONE_KEY } from "./schemas.js";

/** A create's input, as POST takes it (PUT and a batch item: the external id from the path or the item). */
export interface ContactCreate {
  fullName?: string;
  phone: string;
  email?: string;
  country?: string;
  externalId?: string | null;
}

export const CONTACT_WRITES = {
  /** PATCH's fields; PUT applies fullName and email of them. */
  updatable: ["fullName", "email", "marketingOptOut", "externalId"],
  /** What PUT applies to an object it finds (every other field of its body is create-only). */
  put: ["fullName", "email"],
  /** Set by a create only: PUT's body must name the stored phone (normalised, 422 when not a number) and leave out or name the country. */
  createOnly: {
    phone: (v, c, ctx, body) =>
      requirePhone(v, body.country ?? c.country ?? ctx.caller.tenant.defaultCountry, "phone") === c.phone,
    country: (v, c) => v === c.country,
  } satisfies CreateOnly<ContactCreate, { phone: string | null; country: string | null }>,
  /** The unique indexes of the tenant's contacts (live and deleted) and the field each refuses. */
  unique: { phone: PHONE_KEY, email: EMAIL_KEY, externalId: "Contact_tenantId_externalId_key" },
} as const;

/** The phone a create stores: E.164 in the region of `country`, else the tenant's (422 when it is not a number). */
export const createdPhone = (ctx: AuthedContext, input: Pick<ContactCreate, "phone" | "country">) =>
  requirePhone(input.phone, input.country ?? ctx.caller.tenant.defaultCountry, "phone");

/** The row a create stores: every column of the contact's row but updatedAt (the database's: "row_touch"), and the tenant. */
export function contactRow(ctx: AuthedContext, input: ContactCreate, phone = createdPhone(ctx, input)) {
  const now = ctx.services.now();
  const row = {
    id: randomUUID(),
    tenantId: ctx.tenantId,
    fullName: input.fullName ?? null,
    phone,
    email: input.email ?? null,
    country: input.country ?? null,
    phoneVerifiedAt: null,
    emailVerifiedAt: null,
    marketingOptOut: false,
    marketingOptOutAt: null,
    origin: "api",
    externalId: input.externalId ?? null,
    version: 1,
    createdAt: now,
  };
  // Every column of the row: a column added to model/contact.ts and not written here fails to compile.
  return row satisfies StoredRow<ContactRow, never, "updatedAt">;
}
