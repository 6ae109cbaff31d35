// Input and output pieces shared by every resource: ids, query integers, date-times, body scalars,
// the offset list envelope. Query values arrive as strings: they are parsed here with explicit rules
// (an integer is digits only; 1.5 and "1e2" are 422) rather than through trpc-to-openapi's coercion.
// (The adapter drops empty query values, so `?limit=` counts as absent.)
import { z } from "zod";

/**
 * A UUID in the 8-4-4-4-12 hex form (any version), as every id in the API, normalised to lower case
 * here, once, for every operation and transport: everything downstream (queries, the calendar lock
 * key, Idempotency-Key fingerprints, comparisons) sees one spelling. `overwrite` keeps it a string
 * schema, so the OpenAPI document is unchanged.
 */
export const Id = z.guid({ message: "must be a UUID" }).overwrite((s) => s.toLowerCase());

/** Output date-time (always UTC, ISO 8601 with milliseconds). */
export const Timestamp = z.iso.datetime();
/**
 * An instant read from the database: a Date (Prisma, a transaction), or already the ISO string
 * (a list read on the raw runner with `isoTimes`, server/db/times.ts). Only serialized, never
 * computed with: code that compares or shifts one reads it as a Date first.
 */
export type Instant = Date | string;
export const iso = (d: Instant) => (typeof d === "string" ? d : d.toISOString());
export const isoOrNull = (d: Instant | null | undefined) => (d ? iso(d) : null);

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

/** Input calendar date YYYY-MM-DD that exists (2026-02-30 is rejected), years 0001–9999. */
export const DateInput = z
  .string()
  .regex(/^\d{4}-\d{2}-\d{2}$/, "must be a date in the form YYYY-MM-DD")
  .refine((s) => !s.startsWith("0000-") && !Number.isNaN(Date.parse(`${s}T00:00:00Z`)) && new Date(`${s}T00:00:00Z`).toISOString().startsWith(s), {
    message: "must be a real calendar date between 0001-01-01 and 9999-12-31",
    params: { code: "invalid_date" },
  });

/**
 * An integer query parameter: digits only over REST, or a number from an internal tRPC caller.
 * Documented in OpenAPI as what it is on the wire: an integer with its bounds.
 */
export function queryInt(name: string, min: number, max: number) {
  return z
    .union([z.number(), z.string().regex(/^\d{1,15}$/, `${name} must be a non-negative integer`).transform(Number)])
    .pipe(z.number().int().min(min).max(max))
    .meta({ override: integerDoc(min, max) });
}

/** zod-openapi override: replace the rendered schema with a plain bounded integer. */
function integerDoc(min: number, max: number, fallback?: number) {
  return ({ jsonSchema }: { jsonSchema: Record<string, unknown> }) => {
    for (const k of Object.keys(jsonSchema)) delete jsonSchema[k];
    Object.assign(jsonSchema, { type: "integer", minimum: min, maximum: max }, fallback === undefined ? {} : { default: fallback });
  };
}

/** An optional integer query parameter with a default. */
export function queryIntDefault(name: string, min: number, max: number, fallback: number) {
  return queryInt(name, min, max)
    .optional()
    .transform((v) => v ?? fallback)
    .meta({ override: integerDoc(min, max, fallback) });
}

export const MAX_LIMIT = 200;
export const DEFAULT_LIMIT = 50;

/** offset (≥ 0, default 0) and limit (1–200, default 50), common rule 1. */
export const PageQuery = {
  offset: queryIntDefault("offset", 0, 2_147_483_647, 0),
  limit: queryIntDefault("limit", 1, MAX_LIMIT, DEFAULT_LIMIT),
};

export const Pagination = z.object({
  page: z.number().int(),
  pageSize: z.number().int(),
  totalItems: z.number().int(),
  totalPages: z.number().int(),
  hasNext: z.boolean(),
  hasPrev: z.boolean(),
}).meta({
  id: "Pagination",
  description:
    "`pageSize` is the `limit` asked for; `page` (⌊offset / limit⌋ + 1) and `totalPages` count pages of that size. A page cut by the byte budget " +
    "holds fewer than `pageSize` items with `hasNext` true: the next page starts at `offset` + the number of items received.",
});

/**
 * `returned`: the items of this page — fewer than `limit` on a page cut by the byte budget
 * (routers/_lib/page-budget.ts), which still has a next page when offset + returned < total.
 * `pageSize` stays the limit asked for; `page` and `totalPages` count pages of that size.
 */
export function pagination(total: number, page: { offset: number; limit: number }, returned = page.limit): z.infer<typeof Pagination> {
  return {
    page: Math.floor(page.offset / page.limit) + 1,
    pageSize: page.limit,
    totalItems: total,
    totalPages: Math.ceil(total / page.limit),
    hasNext: page.offset + Math.min(returned, page.limit) < total,
    hasPrev: page.offset > 0,
  };
}

/** The offset list envelope: items, total, pagination (plus per-resource extras). */
export function OffsetList<T extends z.ZodType>(item: T) {
  return z.object({ items: z.array(item), total: z.number().int(), pagination: Pagination });
}

export function offsetList<T>(items: T[], total: number, page: { offset: number; limit: number }) {
  return { items, total, pagination: pagination(total, page, items.length) };
}

/** Largest value of a PostgreSQL integer column. */
export const INT4_MAX = 2_147_483_647;

// Body scalars. trpc-to-openapi marks every z.number()/z.boolean() of an input schema (top level and
// nested objects, bodies included) as coercing, which would accept "3", "" (→ 0), true (→ 1),
// null (→ 0) or "false" (→ true). A schema wrapped in a pipe is left alone, so only real JSON
// numbers and booleans pass. Every number or boolean in a body uses these.
export const BodyInt = (min: number, max: number) => z.number().int().min(min).max(max).pipe(z.number());
export const BodyBool = z.boolean().pipe(z.boolean());

/** Bounded free text. */
export const Text = (max: number, min = 1) => z.string().min(min).max(max);
