// API key → tenant, owner, effective scopes and rate-limit ceilings, read fresh on every request
// (one database round trip) so that a plan change, a revocation or a new override applies at once.
// The plan gate lives here too: it is checked on every request, before quotas and scopes.
import type { Database, QueryOptions } from "../db/client.js";
import { readOncePerDatabase } from "../db/once.js";
import { AppError } from "../errors.js";
import { hashesEqual, hashKey, keyPrefix } from "./keys.js";
import { effectiveScopes, type Scope } from "./scopes.js";

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
 * "ApiKey_lookup" (migration 20261127100000_enum_domains, with `p_prefix` for `$1`), whose plan the
 * server connection caches; test/db/tenant-queries.test.ts checks that the function's body is this query.
 */
const lookupOver = (r: Record<LookupTable, string>) => `
  SELECT k."id", k."keyHash", k."expiresAt", k."revokedAt", k."scopes", k."tenantId", k."ownerId",
         u."apiGrant", t."plan", t."timezone", t."defaultCountry", t."slotMinutes",
         COALESCE(t."rateLimitPerMinute", p."perMinute") AS "perMinute",
         COALESCE(t."rateLimitPerDay", p."perDay") AS "perDay"
    FROM ${r.ApiKey} k
    JOIN ${r.User} u ON u."tenantId" = k."tenantId" AND u."id" = k."ownerId"
    JOIN ${r.Tenant} t ON t."id" = k."tenantId"
    JOIN ${r.PlanLimit} p ON p."plan" = t."plan"
   WHERE k."prefix" = $1`;

/** The tables the lookup reads (all four reference tables on Citus). */
const LOOKUP_TABLES = ["ApiKey", "User", "Tenant", "PlanLimit"] as const;
type LookupTable = (typeof LOOKUP_TABLES)[number];

export const LOOKUP = lookupOver({ ApiKey: '"ApiKey"', User: '"User"', Tenant: '"Tenant"', PlanLimit: '"PlanLimit"' });

/** The statement every request sends where named statements are not kept (the plan is cached inside the function). */
export const LOOKUP_CALL = `SELECT * FROM "ApiKey_lookup"($1)`;

/** The lookup's options, made once: every request sends it. */
const LOOKUP_OPTIONS = { prepare: { unnamed: LOOKUP_CALL } } as const;

/**
 * On a Citus node that holds a placement of each of the four reference tables (a coordinator in the
 * metadata holds one of every reference table), the same query over those placements: PostgreSQL then
 * plans it once per connection like any named statement, where over the reference tables Citus plans it
 * again and deparses it for its own local placement on every request (~0.35 ms of the coordinator's CPU:
 * pgbench on this machine's cluster, 2,144 against 7,860 tps; docs/decisions/scale-out.md). The rows are
 * the ones Citus reads: a reference table's every placement is written in the writing transaction, and
 * Citus reads it from the local placement itself. Found once per database; a placement that has gone (the
 * table undistributed, the node removed from the metadata) fails with 42P01, and the lookup is found
 * again and the request answered over the tables.
 */
export const LOCAL_PLACEMENTS_SQL = `
  SELECT c.relname AS "table", shard_name(s.logicalrelid, s.shardid) AS "shard"
    FROM pg_dist_shard s
    JOIN pg_dist_partition d ON d.logicalrelid = s.logicalrelid AND d.partmethod = 'n' AND d.repmodel = 't'
    JOIN pg_dist_placement pl ON pl.shardid = s.shardid AND pl.shardstate = 1
                             AND pl.groupid = (SELECT groupid FROM pg_dist_local_group)
    JOIN pg_class c ON c.oid = s.logicalrelid
   WHERE c.relnamespace = current_schema()::regnamespace AND c.relname = ANY($1::text[])`;

interface KeyLookup {
  text: string;
  options: QueryOptions;
}
const OVER_TABLES: KeyLookup = { text: LOOKUP, options: LOOKUP_OPTIONS };
const lookups = readOncePerDatabase(findLookup);
/** Texts of the lookup over local placements made so far (isKeyLookup). */
const localTexts = new Set<string>();

async function findLookup(db: Database): Promise<KeyLookup> {
  if (db.kind !== "postgres") return OVER_TABLES;
  const [citus] = await db.sql.query<{ on: boolean }>(`SELECT to_regclass('pg_catalog.pg_dist_local_group') IS NOT NULL AS "on"`);
  if (!citus?.on) return OVER_TABLES;
  const rows = await db.sql.query<{ table: LookupTable; shard: string }>(LOCAL_PLACEMENTS_SQL, [LOOKUP_TABLES]);
  const shards = Object.fromEntries(rows.map((r) => [r.table, r.shard])) as Record<LookupTable, string>;
  if (!LOOKUP_TABLES.every((t) => shards[t])) return OVER_TABLES;
  const text = lookupOver(shards);
  if (localTexts.size < 64) localTexts.add(text);
  return { text, options: { prepare: true } };
}

/**
 * The key lookup `db` runs (found once per database — createApp asks at start; a failed search is
 * tried again by the next request).
 */
export const keyLookup = (db: Database): Promise<KeyLookup> => lookups.get(db);

/** Whether a statement is the key lookup over a node's placements (LOOKUP with their names). */
export const isLocalKeyLookup = (sql: string) => localTexts.has(sql);
/** Whether a statement is the key lookup, in any of its forms. */
export const isKeyLookup = (sql: string) => sql === LOOKUP || sql === LOOKUP_CALL || localTexts.has(sql);

async function lookupRows(db: Database, prefix: string): Promise<Row[]> {
  const found = keyLookup(db);
  // The search failed (it is tried again by the next request): this request over the tables.
  const lookup = await found.catch(() => OVER_TABLES);
  if (lookup === OVER_TABLES) return db.sql.query<Row>(LOOKUP, [prefix], LOOKUP_OPTIONS);
  try {
    return await db.sql.query<Row>(lookup.text, [prefix], lookup.options);
  } catch (err) {
    // A placement gone since it was found: found again by the next request, this one over the tables.
    if ((err as { code?: string }).code !== "42P01") throw err;
    lookups.forget(db, found);
    return db.sql.query<Row>(LOOKUP, [prefix], LOOKUP_OPTIONS);
  }
}

/**
 * Resolves the presented key. Throws 401 INVALID_CREDENTIALS / TOKEN_EXPIRED or 403 PLAN_NOT_ELIGIBLE.
 * `presentedHash`: the key's hash when the caller has already computed it (hashKey of the trimmed
 * key; the guard does, for the quota decision).
 */
export async function authenticate(db: Database, presented: string | undefined, now = new Date(), presentedHash?: string): Promise<Caller> {
  const raw = presented?.trim() ?? "";
  const prefix = raw ? keyPrefix(raw) : null;
  if (!prefix) throw new AppError("INVALID_CREDENTIALS", raw ? "Invalid API key" : "Missing X-API-Key header");
  // Parsed and planned once per connection: a named statement, or behind a pooler the function
  // call, so that the four-table join is not planned on every request.
  const rows = await lookupRows(db, prefix);
  const row = rows[0];
  const hash = presentedHash ?? hashKey(raw);
  if (!row || !hashesEqual(row.keyHash, hash) || row.revokedAt) throw new AppError("INVALID_CREDENTIALS", "Invalid API key");
  if (row.expiresAt && new Date(row.expiresAt).getTime() <= now.getTime()) throw new AppError("TOKEN_EXPIRED", "API key has expired");
  if (!ELIGIBLE_PLANS.has(row.plan))
    throw new AppError("PLAN_NOT_ELIGIBLE", "The tenant's plan does not include API access (Pro or Enterprise required)", { plan: row.plan });
  return {
    keyId: row.id,
    keyPrefix: prefix,
    keyHash: hash,
    tenantId: row.tenantId,
    ownerId: row.ownerId,
    plan: row.plan,
    scopes: effectiveScopes(row.scopes, row.apiGrant),
    limits: { perMinute: Number(row.perMinute), perDay: Number(row.perDay) },
    tenant: { timezone: row.timezone, defaultCountry: row.defaultCountry?.trim() ?? null, slotMinutes: row.slotMinutes },
  };
}
