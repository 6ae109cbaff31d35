// Two-way sync, the shared rules (docs/decisions/api.md, "Two-way sync"):
//   - `externalId`, the integrator's own id on leads, contacts and tickets: its input rule, the
//     holder named by a 409 (`details.existingId`), the list filter;
//   - versions and preconditions: If-Match parsed once by the transport (`parseIfMatch()`) and read
//     by the operation (`preconditionOf()`), checked against
//     the version a write is about to change (`checkVersion()`, 412 PRECONDITION_FAILED with the
//     current version), and made atomic by writing only where the row still has that version
//     (`versionGuard()`, then `missedWrite()` tells a vanished row, 404, from a newer one, 412);
//   - If-None-Match for the GET-one answers (`noneMatch()`, used by rest/facade.ts for the 304).
// The ETag header itself is set in one place, rest/facade.ts, from the answer's `version`.
import { SYNCED_TABLES, type SyncedTable } from "../../model/resources.js";
import { z } from "zod";
import { Prisma } from "../../generated/prisma/client.js";
import { dbViolation } from "../../server/db/errors.js";
import type { Db } from "../../server/db/client.js";
import { AppError, notFound } from "../../server/errors.js";

// ---- external ids -------------------------------------------------------------------------------

export { ExternalId, EXTERNAL_ID_MAX } from "../../model/sync.js";

/** The resources that carry an external id, with their unique index. */
export const EXTERNAL_KEYS = Object.fromEntries(
  SYNCED_TABLES.map((t) => [t, `${t}_tenantId_externalId_key`]),
) as Record<SyncedTable, string>;
export type { SyncedTable };

export const isExternalIdTaken = (err: unknown, table: SyncedTable) => {
  const v = dbViolation(err);
  return v?.sqlState === "23505" && v.constraint === EXTERNAL_KEYS[table];
};

/** The id of the tenant's object of `table` that holds `externalId`. */
export async function holderOf(
  db: Db,
  tenantId: string,
  table: SyncedTable,
  externalId: string,
): Promise<string | null> {
  const rows = await db.$queryRaw<{ id: string }[]>`
    SELECT "id" FROM ${Prisma.raw(`"${table}"`)} WHERE "tenantId" = ${tenantId}::uuid AND "externalId" = ${externalId} LIMIT 1`;
  return rows[0]?.id ?? null;
}

/** How the holder of a refused value is found, once a statement can run again. */
type HolderLookup = (db: Db) => Promise<string | null>;
const LOOKUP = Symbol("holder lookup");

/**
 * 409 ALREADY_EXISTS naming the field and, in `details.existingId`, the object that holds the value:
 * known (an id), or found by `lookup` once the refused transaction has ended (`nameHolder()`: the
 * procedure builders do it for every failed call, a batch after rolling its item back).
 */
export function alreadyExists(what: string, field: string, holder: string | HolderLookup): AppError {
  const err = new AppError("ALREADY_EXISTS", `A ${what.toLowerCase()} with this ${field} already exists`, {
    field,
    existingId: typeof holder === "string" ? holder : null,
  });
  if (typeof holder !== "string") (err as AppError & { [LOOKUP]?: HolderLookup })[LOOKUP] = holder;
  return err;
}

/** Fills in `details.existingId` of a conflict whose holder is still to be read, on `db` (a usable connection). */
export async function nameHolder(err: unknown, db: Db): Promise<void> {
  const lookup = err instanceof AppError ? (err as AppError & { [LOOKUP]?: HolderLookup })[LOOKUP] : undefined;
  if (!lookup) return;
  const app = err as AppError & { [LOOKUP]?: HolderLookup };
  delete app[LOOKUP];
  app.details.existingId = await lookup(db);
}

/** A write refused by the external-id index → 409 naming the holder (see alreadyExists); anything else is rethrown. */
export function externalIdConflict(
  err: unknown,
  tenantId: string,
  table: SyncedTable,
  externalId: string | null | undefined,
): never {
  if (externalId && isExternalIdTaken(err, table))
    throw alreadyExists(table, "externalId", (db) => holderOf(db, tenantId, table, externalId));
  throw err;
}

// ---- versions and preconditions -----------------------------------------------------------------

/** An If-Match or If-None-Match value: `*`, or its entity tags (the versions among them, strong and weak). */
export interface EntityTags {
  any: boolean;
  strong: number[];
  weak: number[];
}

/** RFC 9110 entity-tag: optional W/, then a quoted run of etagc (no DQUOTE, no controls, no space). */
const ENTITY_TAG = /^(W\/)?"([\x21\x23-\x7e\x80-\xff]*)"$/;
const VERSION = /^[1-9][0-9]{0,9}$/;
const INT4_MAX = 2_147_483_647;
/** Most entity tags read from one header (a list longer than this is malformed). */
export const MAX_ENTITY_TAGS = 100;

/** The header's tags, or null when it is not `*` or a comma-separated list of entity tags. */
export function parseEntityTags(value: string): EntityTags | null {
  const text = value.trim();
  if (text === "*") return { any: true, strong: [], weak: [] };
  const out: EntityTags = { any: false, strong: [], weak: [] };
  let count = 0;
  for (const part of text.split(",")) {
    const tag = part.trim();
    if (tag === "") continue; // the list rule allows empty elements
    if (++count > MAX_ENTITY_TAGS) return null;
    const m = ENTITY_TAG.exec(tag);
    if (!m) return null;
    // A tag that is not one of our versions is well-formed and simply matches nothing.
    if (VERSION.test(m[2]!) && Number(m[2]) <= INT4_MAX) (m[1] ? out.weak : out.strong).push(Number(m[2]));
  }
  return count === 0 ? null : out;
}

const headerProblem = (header: string, message: string) =>
  new AppError("VALIDATION_ERROR", `${header}: ${message}`, {
    fields: [{ field: header, code: "invalid_header", message }],
    fieldCount: 1,
  });

/** 422 for a header the operation does not take (`why`: what applies instead). */
export const headerNotApplicable = (header: string, why: string) =>
  new AppError("VALIDATION_ERROR", `${header}: not applicable to this operation (${why})`, {
    fields: [{ field: header, code: "invalid_header", message: `not applicable to this operation (${why})` }],
    fieldCount: 1,
  });

/** A version as a body field (a batch item's `ifMatch`): a positive int4. */
export const VersionNumber = z.number().int().min(1).max(INT4_MAX);

const headerText = (raw: string | string[] | undefined) => (Array.isArray(raw) ? raw.join(", ") : raw);

/**
 * An If-Match header's value (undefined: none), for a transport to parse once: its tags, or the 422
 * VALIDATION_ERROR naming the header when it is malformed (raised by the operation that reads it,
 * preconditionOf). A weak tag is well-formed but never matches (If-Match compares strongly).
 */
export function parseIfMatch(raw: string | string[] | undefined): EntityTags | AppError | undefined {
  const text = headerText(raw);
  if (text === undefined) return undefined;
  return parseEntityTags(text) ?? headerProblem("If-Match", `must be * or a list of quoted versions such as "3"`);
}

/** The call's If-Match (undefined: none); a malformed one is its 422, raised here. */
export function preconditionOf(ctx: {
  request: { ifMatch?: EntityTags; problems?: { ifMatch?: AppError } };
}): EntityTags | undefined {
  if (ctx.request.problems?.ifMatch) throw ctx.request.problems.ifMatch;
  return ctx.request.ifMatch;
}

/** Whether If-None-Match names `version` (weak comparison) or is `*`. A malformed header is ignored (RFC 9110 §13.1.2: the condition is then not applied). */
export function noneMatch(raw: string | string[] | undefined, version: number): boolean {
  const text = headerText(raw);
  if (text === undefined) return false;
  const tags = parseEntityTags(text);
  return !!tags && (tags.any || tags.strong.includes(version) || tags.weak.includes(version));
}

export const etagOf = (version: number) => `"${version}"`;

/** 412 PRECONDITION_FAILED: the object's current version (null: there is none). */
export const preconditionFailed = (currentVersion: number | null) =>
  new AppError(
    "PRECONDITION_FAILED",
    currentVersion === null
      ? "If-Match was given but the object does not exist"
      : `The object is at version ${currentVersion}, which If-Match does not name`,
    { currentVersion },
  );

/** Throws 412 unless If-Match (when given) names `version`; `null`: there is no object (only `*`… nothing matches it). */
export function checkVersion(pre: EntityTags | undefined, version: number | null): void {
  if (!pre) return;
  if (version !== null && (pre.any || pre.strong.includes(version))) return;
  throw preconditionFailed(version);
}

/** The where condition that makes a checked write atomic: only while the row still has the version that was checked. */
export const versionGuard = (pre: EntityTags | undefined, version: number) => (pre ? { version } : {});

/**
 * A guarded write that matched no row: the row is gone (404) or was changed since it was read
 * (412 with its version now).
 */
export async function missedWrite(current: Promise<{ version: number } | null>, what: string): Promise<never> {
  const row = await current;
  if (!row) throw notFound(what);
  throw preconditionFailed(row.version);
}
