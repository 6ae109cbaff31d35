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

// Instants (output Timestamp, input DateTimeInput, the storable range) live in model/instants.ts,
// below both the routers and the admin code; re-exported here for the routers.
export {
  clampInstant,
  DateTimeInput,
  INSTANT_RANGE,
  isStorableInstant,
  MAX_INSTANT,
  MIN_INSTANT,
  Timestamp,
} from "../../model/instants.js";

/** Input calendar date YYYY-MM-DD that exists (2026-02-30 is rejected), years 0001–9999. */
export const DateInput = z
  .string()
  .regex(/^\d{4}-\d{2}-\d{2}$/, "must be a date in the form YYYY-MM-DD")
  .refine(
    (s) =>
      !s.startsWith("0000-") &&
      !Number.isNaN(Date.parse(`${s}T00:00:00Z`)) &&
      new Date(`${s}T00:00:00Z`).toISOString().startsWith(s),
    {
      message: "must be a real calendar date between 0001-01-01 and 9999-12-31",
      params: { code: "invalid_date" },
    },
  );

/**
 * An integer query parameter: digits only over REST, or a number from an internal tRPC caller.
 * Documented in OpenAPI as what it is on the wire: an integer with its bounds.
 */
export function queryInt(name: string, min: number, max: number) {
  return z
    .union([
      z.number(),
      z
        .string()
        .regex(/^\d{1,15}$/, `${name} must be a non-negative integer`)
        .transform(Number),
    ])
    .pipe(z.number().int().min(min).max(max))
    .meta({ override: integerDoc(min, max) });
}

/** zod-openapi override: replace the rendered schema with a plain bounded integer. */
function integerDoc(min: number, max: number, fallback?: number) {
  return ({ jsonSchema }: { jsonSchema: Record<string, unknown> }) => {
    for (const k of Object.keys(jsonSchema)) delete jsonSchema[k];
    Object.assign(
      jsonSchema,
      { type: "integer", minimum: min, maximum: max },
      fallback === undefined ? {} : { default: fallback },
    );
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

export const Pagination = z
  .object({
    page: z.number().int(),
    pageSize: z.number().int(),
    totalItems: z.number().int(),
    totalPages: z.number().int(),
    hasNext: z.boolean(),
    hasPrev: z.boolean(),
  })
  .meta({
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
export function pagination(
  total: number,
  page: { offset: number; limit: number },
  returned = page.limit,
): z.infer<typeof Pagination> {
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
