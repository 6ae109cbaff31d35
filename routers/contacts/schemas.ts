// Contact: the public object, its serializer, the input pieces shared by create and update, the
// duplicate (unique-index) mapping, and the opaque keyset cursor of the contacts list.
import { isSupportedCountry } from "libphonenumber-js/max";
import { z } from "zod";
import { Prisma } from "../../generated/prisma/client.js";
import { isUniqueViolation } from "../../server/db/errors.js";
import { AppError } from "../../server/errors.js";
import { iso, isoOrNull, isStorableInstant, Timestamp, type Instant } from "../_lib/schemas.js";

export const ContactObject = z.object({
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
  createdAt: Timestamp,
}).meta({ id: "Contact" });
export type ContactObject = z.infer<typeof ContactObject>;

export interface ContactRow {
  id: string;
  fullName: string | null;
  phone: string | null;
  email: string | null;
  country: string | null;
  phoneVerifiedAt: Instant | null;
  emailVerifiedAt: Instant | null;
  marketingOptOut: boolean;
  marketingOptOutAt: Instant | null;
  origin: string;
  createdAt: Instant;
}

/** The columns of a ContactRow, as the list and the changes feed read them (unqualified). */
export const CONTACT_COLUMNS = Prisma.sql`"id", "fullName", "phone", "email", "country", "phoneVerifiedAt", "emailVerifiedAt", "marketingOptOut",
  "marketingOptOutAt", "origin", "createdAt"`;

export const toContact = (c: ContactRow): ContactObject => ({
  id: c.id,
  fullName: c.fullName,
  phone: c.phone,
  email: c.email,
  country: c.country,
  phoneVerifiedAt: isoOrNull(c.phoneVerifiedAt),
  emailVerifiedAt: isoOrNull(c.emailVerifiedAt),
  marketingOptOut: c.marketingOptOut,
  marketingOptOutAt: isoOrNull(c.marketingOptOutAt),
  origin: c.origin,
  createdAt: iso(c.createdAt),
});

// ---- input pieces -------------------------------------------------------------------------------

export const FullName = z.string().max(255);
export const Email = z.email({ message: "must be an email address" }).max(320);
/** Raw phone as sent (normalized to E.164 by the resolver, which knows the tenant's default country). */
export const RawPhone = z.string().min(1).max(40);
/** ISO 3166-1 alpha-2, any case → upper case; must be a region the phone library knows. */
export const Country = z
  .string()
  .regex(/^[A-Za-z]{2}$/, "must be exactly 2 letters (ISO 3166-1 alpha-2)")
  .transform((s) => s.toUpperCase())
  .refine((s) => isSupportedCountry(s), "unknown country code");

// ---- duplicates ---------------------------------------------------------------------------------

export const PHONE_KEY = "Contact_tenantId_phone_key";
export const EMAIL_KEY = "Contact_tenantId_email_ci_key";

/**
 * A violation of the per-tenant phone / case-insensitive email unique indexes (live and soft-deleted
 * contacts alike) → 409 ALREADY_EXISTS naming the field; anything else is rethrown.
 */
export function duplicateContact(err: unknown): never {
  if (isUniqueViolation(err, PHONE_KEY))
    throw new AppError("ALREADY_EXISTS", "A contact with this phone already exists", { field: "phone" });
  if (isUniqueViolation(err, EMAIL_KEY))
    throw new AppError("ALREADY_EXISTS", "A contact with this email already exists", { field: "email" });
  throw err;
}

// ---- keyset cursor ------------------------------------------------------------------------------

export interface ContactCursor {
  createdAt: Date;
  id: string;
}

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** base64url("<createdAt ISO>|<id>") of the last item of a page. */
export const encodeCursor = (c: { createdAt: Instant; id: string }) => Buffer.from(`${iso(c.createdAt)}|${c.id}`, "utf8").toString("base64url");

export function decodeCursor(raw: string): ContactCursor | null {
  if (!/^[A-Za-z0-9_-]{1,200}$/.test(raw)) return null;
  const text = Buffer.from(raw, "base64url").toString("utf8");
  const m = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z)\|(.+)$/.exec(text);
  if (!m || !UUID_RE.test(m[2]!)) return null;
  const createdAt = new Date(m[1]!);
  if (Number.isNaN(createdAt.getTime()) || createdAt.toISOString() !== m[1] || !isStorableInstant(createdAt)) return null;
  return { createdAt, id: m[2]!.toLowerCase() };
}

export const CursorInput = z
  .string()
  .describe(
    "Opaque keyset cursor: the `nextCursor` of a previous page. When given, `offset` is ignored and the page continues strictly after that position (newest first).",
  )
  .transform((s, ctx) => {
    const c = decodeCursor(s);
    if (!c) {
      ctx.addIssue({ code: "custom", message: "malformed cursor" });
      return z.NEVER;
    }
    return c;
  });
