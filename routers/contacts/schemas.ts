// Contact: the input pieces shared by create and update, the duplicate (unique-index) mapping, and
// the opaque keyset cursor of the contacts list. The public object, the row and the mapper:
// model/contact.ts.
import { isSupportedCountry } from "libphonenumber-js/max";
import { z } from "zod";
import { Prisma } from "../../generated/prisma/client.js";
import type { Db } from "../../server/db/client.js";
import { isUniqueViolation } from "../../server/db/errors.js";
import { alreadyExists, externalIdConflict } from "../_lib/sync.js";
import { toIso } from "../../model/instants.js";
import { isStorableInstant } from "../_lib/schemas.js";

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
 * A violation of the per-tenant phone / case-insensitive email / external id unique indexes (live and
 * soft-deleted contacts alike) → 409 ALREADY_EXISTS naming the field and, in `details.existingId`,
 * the contact that holds the value (read once the refused transaction has ended:
 * routers/_lib/sync.ts alreadyExists); anything else is rethrown.
 */
export function duplicateContact(
  err: unknown,
  tenantId: string,
  written: { phone?: string | null; email?: string | null; externalId?: string | null },
): never {
  const holder = (cond: Prisma.Sql) => async (db: Db) =>
    (
      await db.$queryRaw<
        { id: string }[]
      >`SELECT "id" FROM "Contact" WHERE "tenantId" = ${tenantId}::uuid AND ${cond} LIMIT 1`
    )[0]?.id ?? null;
  if (isUniqueViolation(err, PHONE_KEY) && written.phone)
    throw alreadyExists("Contact", "phone", holder(Prisma.sql`"phone" = ${written.phone}`));
  if (isUniqueViolation(err, EMAIL_KEY) && written.email)
    throw alreadyExists("Contact", "email", holder(Prisma.sql`lower("email") = lower(${written.email})`));
  return externalIdConflict(err, tenantId, "Contact", written.externalId);
}

// ---- keyset cursor ------------------------------------------------------------------------------

export interface ContactCursor {
  createdAt: Date;
  id: string;
}

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** base64url("<createdAt ISO>|<id>") of the last item of a page. */
export const encodeCursor = (c: { createdAt: Date | string; id: string }) =>
  Buffer.from(`${toIso(c.createdAt)}|${c.id}`, "utf8").toString("base64url");

export function decodeCursor(raw: string): ContactCursor | null {
  if (!/^[A-Za-z0-9_-]{1,200}$/.test(raw)) return null;
  const text = Buffer.from(raw, "base64url").toString("utf8");
  const m = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z)\|(.+)$/.exec(text);
  if (!m || !UUID_RE.test(m[2]!)) return null;
  const createdAt = new Date(m[1]!);
  if (Number.isNaN(createdAt.getTime()) || createdAt.toISOString() !== m[1] || !isStorableInstant(createdAt))
    return null;
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
