// API key → tenant, owner, effective scopes and rate-limit ceilings, read fresh on every request
// (one database round trip) so that a plan change, a revocation or a new override applies at once.
// The plan gate lives here too: it is checked on every request, before quotas and scopes. A prefix
// no key has is remembered for a few seconds (server/auth/unknown-prefixes.ts): refused without a lookup.
import type { Database } from "../db/client.js";
import { AppError } from "../errors.js";
import { hashesEqual, hashKey, keyPrefix } from "./keys.js";
import { effectiveScopes, type Scope } from "./scopes.js";
import type { UnknownPrefixes } from "./unknown-prefixes.js";

export interface Caller {
  keyId: string;
  keyPrefix: string;
  keyHash: string;
  tenantId: string;
  ownerId: string;
  plan: "starter" | "pro" | "enterprise";
  scopes: Scope[];
  limits: { perMinute: number; perDay: number };
  tenant: { timezone: string; defaultCountry: string | null; slotMinutes: number };
}

export const ELIGIBLE_PLANS = new Set(["pro", "enterprise"]);

interface Row {
  id: string;
  keyHash: string;
  expiresAt: Date | null;
  revokedAt: Date | null;
  scopes: string[];
  tenantId: string;
  ownerId: string;
  apiGrant: string[];
  plan: Caller["plan"];
  timezone: string;
  defaultCountry: string | null;
  slotMinutes: number;
  perMinute: number;
  perDay: number;
}

/**
 * The key lookup's query: by the key's globally unique prefix (ApiKey, User, Tenant, PlanLimit are
 * reference tables). Sent as a named prepared statement where the connections keep them
 * (server/db/prepared.ts); where they do not (PgBouncer), it runs inside the PL/pgSQL function
 * "ApiKey_lookup" (prisma/functions/ApiKey_lookup.sql, with `p_prefix` for `$1`), whose plan the
 * server connection caches; test/db/tenant-queries.test.ts checks that the function's body is this query.
 * On Citus the four tables are reference tables: Citus answers the join from the local copies, on
 * whatever node the statement arrives.
 */
export const LOOKUP = `
  SELECT k."id", k."keyHash", k."expiresAt", k."revokedAt", k."scopes", k."tenantId", k."ownerId",
         u."apiGrant", t."plan", t."timezone", t."defaultCountry", t."slotMinutes",
         COALESCE(t."rateLimitPerMinute", p."perMinute") AS "perMinute",
         COALESCE(t."rateLimitPerDay", p."perDay") AS "perDay"
    FROM "ApiKey" k
    JOIN "User" u ON u."tenantId" = k."tenantId" AND u."id" = k."ownerId"
    JOIN "Tenant" t ON t."id" = k."tenantId"
    JOIN "PlanLimit" p ON p."plan" = t."plan"
   WHERE k."prefix" = $1`;

/** The statement every request sends where named statements are not kept (the plan is cached inside the function). */
export const LOOKUP_CALL = `SELECT * FROM "ApiKey_lookup"($1)`;

/** The lookup's options, made once: every request sends it. */
const LOOKUP_OPTIONS = { prepare: { unnamed: LOOKUP_CALL } } as const;

/** Whether a statement is the key lookup, in either of its forms. */
export const isKeyLookup = (sql: string) => sql === LOOKUP || sql === LOOKUP_CALL;

/**
 * The refusals of a key's row, in their order: none, another key's hash under the prefix, or revoked
 * (401 INVALID_CREDENTIALS); expired (401 TOKEN_EXPIRED); the tenant's plan without API access (403).
 */
function refuseRow(row: Row | undefined, hash: string, now: Date): asserts row is Row {
  if (!row || !hashesEqual(row.keyHash, hash) || row.revokedAt)
    throw new AppError("INVALID_CREDENTIALS", "Invalid API key");
  if (row.expiresAt && new Date(row.expiresAt).getTime() <= now.getTime())
    throw new AppError("TOKEN_EXPIRED", "API key has expired");
  if (!ELIGIBLE_PLANS.has(row.plan))
    throw new AppError(
      "PLAN_NOT_ELIGIBLE",
      "The tenant's plan does not include API access (Pro or Enterprise required)",
      { plan: row.plan },
    );
}

/**
 * Resolves the presented key. Throws 401 INVALID_CREDENTIALS / TOKEN_EXPIRED or 403 PLAN_NOT_ELIGIBLE.
 * `presentedHash`: the key's hash when the caller has already computed it (hashKey of the trimmed
 * key; the guard does, for the quota decision). `unknown`: the prefixes known to be no key's (the
 * guard's negative cache): such a prefix is refused without a lookup, and one the lookup finds no
 * row for is added to it.
 */
export async function authenticate(
  db: Database,
  presented: string | undefined,
  now = new Date(),
  presentedHash?: string,
  unknown?: UnknownPrefixes,
): Promise<Caller> {
  const raw = presented?.trim() ?? "";
  const prefix = raw ? keyPrefix(raw) : null;
  if (!prefix) throw new AppError("INVALID_CREDENTIALS", raw ? "Invalid API key" : "Missing X-API-Key header");
  if (unknown?.has(prefix)) throw new AppError("INVALID_CREDENTIALS", "Invalid API key");
  // Parsed and planned once per connection: a named statement, or behind a pooler the function
  // call, so that the four-table join is not planned on every request.
  const rows = await db.sql.query<Row>(LOOKUP, [prefix], LOOKUP_OPTIONS);
  const row = rows[0];
  if (!row) unknown?.add(prefix);
  const hash = presentedHash ?? hashKey(raw);
  refuseRow(row, hash, now);
  return {
    keyId: row.id,
    keyPrefix: prefix,
    keyHash: hash,
    tenantId: row.tenantId,
    ownerId: row.ownerId,
    plan: row.plan,
    scopes: effectiveScopes(row.scopes, row.apiGrant),
    limits: { perMinute: Number(row.perMinute), perDay: Number(row.perDay) },
    tenant: {
      timezone: row.timezone,
      defaultCountry: row.defaultCountry?.trim() ?? null,
      slotMinutes: row.slotMinutes,
    },
  };
}

/**
 * The caller as its key stands now (a long wait's re-check before it answers): the same lookup and
 * refusals as at the start of a request — revoked or another key under the prefix (401), expired (401
 * TOKEN_EXPIRED), the plan no longer eligible (403) — with the scopes and ceilings of now.
 */
export async function currentCaller(db: Database, caller: Caller, now = new Date()): Promise<Caller> {
  const rows = await db.sql.query<Row>(LOOKUP, [caller.keyPrefix], LOOKUP_OPTIONS);
  const row = rows[0];
  refuseRow(row, caller.keyHash, now);
  return { ...caller, plan: row.plan, scopes: effectiveScopes(row.scopes, row.apiGrant) };
}
