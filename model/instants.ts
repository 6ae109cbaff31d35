// Instants as the API reads, writes and returns them. Output: an ISO 8601 string in UTC with
// milliseconds (`Iso`, Date#toISOString()'s form), the one type every row carries (model/row.ts).
// Input: a date-time with an explicit offset, within the storable range. Shared by the routers and
// the admin code (server/admin), which import them downward from here.
import { z } from "zod";

/** Output date-time (always UTC, ISO 8601 with milliseconds). */
export const Timestamp = z.iso.datetime();

/** The description of an object's `updatedAt` that the database keeps (the "row_touch" trigger). */
export const UPDATED_AT =
  "When the object last changed: every write that changes it moves it, together with its version, on the database's clock " +
  "(strictly later each time; never before createdAt)";

/**
 * An instant as every row carries it: `YYYY-MM-DDTHH:MM:SS.mmmZ` (years 0001–9999), the string
 * Date#toISOString() gives. The raw runner reads timestamptz columns straight into this form
 * (server/db/times.ts), a transaction's reads are converted to it (server/db/insert.ts readOn), and
 * a Prisma model row's Dates by the row's mapper (model/row.ts).
 */
export type Iso = string;

/**
 * An instant as Iso: a Date formatted; a string already in that form as is (the common case: a check
 * of its length and two characters); any other date-time text (e.g. PostgreSQL's JSON form
 * `2026-11-20T08:00:00.123+00:00`) through a Date. null stays null.
 */
export function toIso(v: Date | string): Iso;
export function toIso(v: Date | string | null | undefined): Iso | null;
export function toIso(v: Date | string | null | undefined): Iso | null {
  if (typeof v === "string")
    return v.length === 24 && v.charCodeAt(23) === 90 && v.charCodeAt(10) === 84 ? v : new Date(v).toISOString();
  return v ? v.toISOString() : null;
}

// Instants the database stores and returns, and that serialize as ISO 8601 with a 4-digit year:
// years 0001–9999 in UTC. PostgreSQL refuses year 0 ("0000-…", 22008) and JavaScript writes years
// after 9999 as "+010000-…", so every date and date-time input is checked against these bounds after
// its offset is applied, and derived instants (e.g. availability's local midnights) are clamped to them.
export const MIN_INSTANT = new Date("0001-01-01T00:00:00.000Z");
export const MAX_INSTANT = new Date("9999-12-31T23:59:59.999Z");
export const INSTANT_RANGE = "between 0001-01-01T00:00:00.000Z and 9999-12-31T23:59:59.999Z (UTC)";

/** Whether a Date is a real instant within [MIN_INSTANT, MAX_INSTANT]. */
export const isStorableInstant = (d: Date) => {
  const t = d.getTime();
  return t >= MIN_INSTANT.getTime() && t <= MAX_INSTANT.getTime();
};

/** `d` moved into [MIN_INSTANT, MAX_INSTANT]. */
export const clampInstant = (d: Date) =>
  d.getTime() < MIN_INSTANT.getTime() ? MIN_INSTANT : d.getTime() > MAX_INSTANT.getTime() ? MAX_INSTANT : d;

/** Input date-time with an explicit offset or Z → Date, within the storable range after UTC conversion. */
export const DateTimeInput = z.iso
  .datetime({ offset: true, message: "must be an ISO 8601 date-time with an offset (e.g. 2026-11-20T08:00:00Z)" })
  .transform((s, ctx) => {
    const d = new Date(s);
    if (isStorableInstant(d)) return d;
    ctx.addIssue({ code: "custom", message: `must be ${INSTANT_RANGE}`, params: { code: "out_of_range" } });
    return z.NEVER;
  });
