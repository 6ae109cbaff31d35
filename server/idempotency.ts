// Idempotency-Key for create endpoints (common rule 4), built once.
// The key is claimed by inserting a unique row (tenant + API key + endpoint + Idempotency-Key) in the same
// transaction as the write: a concurrent duplicate blocks on that row until the first commits, then
// replays; if the first fails, its transaction (and claim) rolls back and the duplicate runs.
// Only successful responses are stored; records expire after IDEMPOTENCY_TTL_SECONDS and are purged.
// A create that ends with a provider call (AfterCommit) commits its claim unfinished (statusCode 0),
// calls the provider outside the transaction, then stores the response: duplicates wait for it.
// A one-row create may first try the one-statement path (OneStatement: claim + stored response + row
// in one autocommit statement); anything it does not write runs the transactional path below.
import { createHash } from "node:crypto";
import { deflateRawSync, inflateRawSync } from "node:zlib";
import { Prisma } from "../generated/prisma/client.js";
import type { Database, Db } from "./db/client.js";
import { PREVIOUS, runForTenant, tenantDelegation } from "./db/delegate.js";
import { IDENT, readRaw, rowSql, type PlannedRow } from "./db/insert.js";
import { transaction } from "./db/transaction.js";
import { AppError, sqlStates } from "./errors.js";

const KEY_RE = /^[\x21-\x7e]{1,255}$/;

/** The Idempotency-Key header, validated (1–255 visible ASCII characters), or undefined. */
export function readIdempotencyKey(header: string | string[] | undefined): string | undefined {
  if (header === undefined) return undefined;
  const value = Array.isArray(header) ? header[0] : header;
  if (value === undefined || !KEY_RE.test(value))
    throw new AppError("VALIDATION_ERROR", "Idempotency-Key must be 1 to 255 visible ASCII characters", {
      fields: [{ field: "Idempotency-Key", code: "invalid_header", message: "1 to 255 visible ASCII characters" }],
    });
  return value;
}

/** Canonical JSON (sorted keys) → SHA-256: the same body in any key order has the same fingerprint. */
export function fingerprint(value: unknown): string {
  const canon = (v: unknown): unknown =>
    Array.isArray(v)
      ? v.map(canon)
      : v && typeof v === "object" && !(v instanceof Date)
        ? Object.fromEntries(
            Object.keys(v)
              .sort()
              .filter((k) => (v as Record<string, unknown>)[k] !== undefined)
              .map((k) => [k, canon((v as Record<string, unknown>)[k])]),
          )
        : v;
  return createHash("sha256")
    .update(JSON.stringify(canon(value)))
    .digest("hex");
}

export interface IdempotencyClaim {
  /** The API key's tenant: every statement on the record is scoped by it (the distribution column). */
  tenantId: string;
  apiKeyId: string;
  endpoint: string;
  key: string;
  fingerprint: string;
  ttlSeconds: number;
}

export interface Replayable<T> {
  body: T;
  replayed: boolean;
}

/**
 * What a create returns when its last step is an outbound provider call. The transaction (the
 * Idempotency-Key claim and the stored, still "pending" message) commits first; then `finish` runs
 * outside any transaction — no connection, transaction or row lock is held while the provider is
 * waited for — and its result is the response body, stored under the key. Until then the claim is
 * unfinished (statusCode 0) and keeps `note`, from which a duplicate can finish the write (with
 * `Finishing.recover`) if the request that started it never did (a crash, a lost database).
 */
export class AfterCommit<T> {
  constructor(
    readonly note: Record<string, unknown>,
    readonly finish: (db: Db) => Promise<T>,
  ) {}
}

export interface Finishing<T> {
  /** How long an unfinished claim is waited for before a duplicate finishes it with recover(). */
  staleAfterMs: number;
  /** Finishes an abandoned write from its note (inside the duplicate's transaction); returns the body. */
  recover: (db: Db, note: unknown) => Promise<T>;
}

/**
 * How a create may store its response more compactly than the body itself (a ticket comment stores
 * the ticket's scalars and its thread length, not the thread). `store` runs on the body when it is
 * recorded; `rebuild` gives the byte-identical body back, from the stored value, on every replay.
 */
export interface RecordCodec<T> {
  store(body: T): unknown;
  rebuild(db: Db, stored: unknown): Promise<T>;
}
/** A stored response written through a codec is {"$rebuild": <stored>}; anything else is the body itself. */
const REBUILD = "$rebuild";

/**
 * The most bytes of JSON text one record's stored response takes. A batch keeps its items within it
 * (routers/_lib/upsert.ts); a one-object record is far below it (its fields are bounded).
 */
export const RECORD_MAX_BYTES = 64 * 1024;
/** A stored response above this many bytes is kept deflated, as {"$deflate": base64}: 100 similar objects shrink 3-6 times. */
const DEFLATE_ABOVE_BYTES = 8 * 1024;
const DEFLATED = "$deflate";

/** The text stored for a response (its JSON, deflated when large): what RECORD_MAX_BYTES bounds. */
export function encodeRecord(stored: unknown): string {
  const json = JSON.stringify(stored);
  if (json.length <= DEFLATE_ABOVE_BYTES && Buffer.byteLength(json) <= DEFLATE_ABOVE_BYTES) return json;
  return JSON.stringify({ [DEFLATED]: deflateRawSync(json).toString("base64") });
}

/** The text stored for `body`, through `codec` when it has one. */
export function storedText<T>(codec: { store(body: T): unknown } | undefined, body: T): string {
  return encodeRecord(codec ? { [REBUILD]: codec.store(body) } : body);
}

/** The stored value back from what the database holds (a parsed jsonb value). */
function inflated(stored: unknown): unknown {
  if (stored && typeof stored === "object" && DEFLATED in stored) {
    return JSON.parse(
      inflateRawSync(Buffer.from(String((stored as Record<string, unknown>)[DEFLATED]), "base64")).toString(),
    );
  }
  return stored;
}

/**
 * A create that is one row, planned before anything is written: the row (every column, the id and
 * timestamps included), the response body it makes, and optionally SQL that must hold for the row to
 * be written in one statement — `with`: CTEs evaluated first (e.g. a transaction-scoped lock and the
 * lookup of a blocker, or the ids the rules resolve), `gate`: a boolean expression over them. When the
 * gate is false, or the statement is refused by a constraint, nothing is written and the create runs
 * its transactional path instead, which reports the precise error (or succeeds): so the one-statement
 * path only ever answers successes, and every failure is exactly the transactional path's.
 *
 * `resolved` names the columns whose value is SQL (a `Prisma.Sql` in `row`, typically a subquery of
 * a `with` CTE) rather than known before the statement, e.g. the contact a lead matches: each is also
 * a top-level key of the body, filled in from the statement's RETURNING, and of the stored response,
 * set in SQL from the same expression — so resolving them costs no statement of its own.
 */
export interface OneStatement<T> extends PlannedRow {
  body: T;
  with?: Prisma.Sql;
  gate?: Prisma.Sql;
  resolved?: readonly string[];
}

/** Database refusals after which the transactional path runs instead (integrity, data, conflicts). */
const FALL_BACK_STATES = /^(22|23|40)/;

/** The claim's row, written by every path: `INSERT INTO ${CLAIM_INTO} … (${claimValues(…)}) ${CLAIM_CONFLICT}`. */
const CLAIM_INTO = Prisma.sql`"IdempotencyRecord" ("tenantId", "apiKeyId", "endpoint", "key", "fingerprint", "statusCode", "responseBody", "expiresAt")`;
const CLAIM_CONFLICT = Prisma.sql`ON CONFLICT ("tenantId", "apiKeyId", "endpoint", "key") DO NOTHING`;
/** The claim's values: 201 with the response stored (the one-statement creates), 0 with '{}' while unfinished. */
function claimValues(claim: IdempotencyClaim, status: 0 | 201, body: Prisma.Sql): Prisma.Sql {
  return Prisma.sql`${claim.tenantId}::uuid, ${claim.apiKeyId}::uuid, ${claim.endpoint}::text, ${claim.key}::text, ${claim.fingerprint}::text, ${Prisma.raw(String(status))}, ${body},
    now() + make_interval(secs => ${claim.ttlSeconds}::double precision)`;
}
/** The stored response of a one-statement create: the body, with each resolved key set to `valueFor(key)`. */
function storedWith(body: string, resolved: readonly string[], valueFor: (name: string) => Prisma.Sql): Prisma.Sql {
  return resolved.length
    ? Prisma.sql`${body}::jsonb || jsonb_build_object(${Prisma.join(resolved.map((n) => Prisma.sql`${n}::text, ${valueFor(n)}`))})`
    : Prisma.sql`${body}::jsonb`;
}

/**
 * The one-statement create: the Idempotency-Key claim (with the response already stored, status 201),
 * the row, and whatever `with` and `gate` check, in ONE round trip and its implicit transaction, no
 * BEGIN/COMMIT. The row is written only if the gate holds and the key was free: a duplicate key (live,
 * unfinished or expired) writes nothing — a concurrent duplicate waits on the claim's unique index
 * until the first commits, then finds the key taken. Two renderings of the same plan:
 *   - one statement of data-modifying CTEs (oneStatement), prepared — on one PostgreSQL or PGlite;
 *   - where "tenant_exec" is distributed (Citus), its statements in one call run on the tenant's
 *     worker (delegatedStatements; server/db/delegate.ts): Citus plans the CTE form in steps whose
 *     intermediate results go to every node, with a two-phase commit (~45 ms of database time per
 *     create on the bench's cluster; ~9 as statements of one delegated call), while on one server
 *     the call's three unprepared statements cost more than the one prepared statement (POST /leads
 *     at 1 connection: 217 against 376 req/s; docs/decisions/scale-out.md).
 * Returns the body written, or undefined when nothing was written.
 */
async function writeInOneStatement<T>(
  db: Database,
  claim: IdempotencyClaim | undefined,
  plan: OneStatement<T>,
  stored: string,
): Promise<T | undefined> {
  const resolved = plan.resolved ?? [];
  for (const name of resolved)
    if (!IDENT.test(name) || !(plan.row[name] instanceof Prisma.Sql))
      throw new Error(`resolved column "${name}" has no SQL value`);
  const written = (await tenantDelegation(db))
    ? ((await runForTenant(db, String(plan.row.tenantId), await delegatedStatements(db, claim, plan, stored))) as
        | Record<string, unknown>
        | undefined)
    : await oneStatement(db, claim, plan, stored);
  if (written === undefined) return undefined;
  if (!resolved.length) return plan.body;
  const body = { ...plan.body } as Record<string, unknown>;
  for (const n of resolved) body[n] = written[n];
  return body as T;
}

/** The plan as one statement; its row of the resolved values, or undefined when nothing was written. */
async function oneStatement<T>(
  db: Database,
  claim: IdempotencyClaim | undefined,
  plan: OneStatement<T>,
  stored: string,
): Promise<Record<string, unknown> | undefined> {
  const { table, columns, values } = await rowSql(db.prisma, plan);
  const gate = plan.gate ?? Prisma.sql`true`;
  const withs = plan.with ? Prisma.sql`WITH ${plan.with}` : Prisma.empty;
  const resolved = plan.resolved ?? [];
  // The stored response with the resolved keys set from the same expressions as the row's columns.
  const storedSql = storedWith(stored, resolved, (n) => plan.row[n] as Prisma.Sql);
  const returning = Prisma.raw(['1 AS "written"', ...resolved.map((n) => `"${n}"`)].join(", "));
  // Sent through the raw runner (one statement, autocommit), not Prisma: see readRaw. Prepared: its
  // texts are one per endpoint and shape of `with`/`gate`, and planning it cost more than running it.
  const statement = claim
    ? Prisma.sql`
        WITH ${plan.with ? Prisma.sql`${plan.with},` : Prisma.empty} "claim" AS (
          INSERT INTO ${CLAIM_INTO} SELECT ${claimValues(claim, 201, storedSql)} WHERE ${gate} ${CLAIM_CONFLICT} RETURNING "id")
        INSERT INTO ${table} ${columns} SELECT ${values} FROM "claim" RETURNING ${returning}`
    : Prisma.sql`${withs} INSERT INTO ${table} ${columns} SELECT ${values} WHERE ${gate} RETURNING ${returning}`;
  const rows = await readRaw(db, { prepare: true })<Record<string, unknown>>(statement);
  return rows.length === 1 ? rows[0] : undefined;
}

/**
 * The plan as the statements of one "tenant_exec" call, each a single-row statement of the tenant:
 *   1. (when the plan has `with`, `gate` or SQL values) one SELECT of the row's SQL values as jsonb,
 *      with `with` as its CTEs, returning no row when `gate` does not hold;
 *   2. (with a key) the claim, INSERT … ON CONFLICT DO NOTHING — no row when the key is taken; the
 *      stored response gets the resolved values;
 *   3. the row, its SQL values from statement 1.
 * RETURNING names no function (Citus allows only immutable ones there): each returns PREVIOUS.
 */
async function delegatedStatements<T>(
  db: Database,
  claim: IdempotencyClaim | undefined,
  plan: OneStatement<T>,
  stored: string,
): Promise<Prisma.Sql[]> {
  const resolved = plan.resolved ?? [];
  const computed = Object.keys(plan.row).filter((n) => plan.row[n] instanceof Prisma.Sql);
  const statements: Prisma.Sql[] = [];
  if (plan.with || plan.gate || computed.length) {
    const values = computed.length
      ? Prisma.join(computed.map((n) => Prisma.sql`${n}::text, ${plan.row[n] as Prisma.Sql}`))
      : Prisma.empty;
    statements.push(Prisma.sql`${plan.with ? Prisma.sql`WITH ${plan.with}` : Prisma.empty}
      SELECT jsonb_build_object(${values}) AS "result" WHERE ${plan.gate ?? Prisma.sql`true`}`);
  }
  if (claim) {
    const storedSql = storedWith(stored, resolved, (n) => Prisma.sql`${PREVIOUS}->${n}::text`);
    statements.push(
      Prisma.sql`INSERT INTO ${CLAIM_INTO} VALUES (${claimValues(claim, 201, storedSql)}) ${CLAIM_CONFLICT} RETURNING ${PREVIOUS}`,
    );
  }
  // The row: its SQL values as statement 1 computed them (cast to their columns' types by rowSql).
  const row = { ...plan.row };
  for (const n of computed) row[n] = Prisma.sql`(${PREVIOUS}->>${n}::text)`;
  const { table, columns, values } = await rowSql(db.prisma, { table: plan.table, row });
  statements.push(Prisma.sql`INSERT INTO ${table} ${columns} VALUES (${values}) RETURNING ${PREVIOUS}`);
  return statements;
}

type Step<T> =
  | { kind: "done"; body: T; replayed: boolean }
  | { kind: "finish"; id: string; after: AfterCommit<T> }
  | { kind: "wait" }
  | { kind: "retry" };

const POLL_MS = 100;
/** Claim attempts that found the record gone or lost a take-over race, before giving up with 503. */
const MAX_CLAIM_RETRIES = 5;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Runs `write` in a transaction together with the claim of the key. Without a key, `write` still
 * runs in one transaction. A repeat with the same fingerprint returns the stored body; a duplicate of
 * a write that is still finishing (an AfterCommit) waits for it, polling, and then replays it.
 * An expired record is taken over with a conditional UPDATE (only while it is still expired), so of
 * concurrent requests reusing an expired key exactly one takes it over and the others replay it; a
 * record purged between the claim's INSERT and its SELECT makes the claim start again.
 * Every transaction goes through db/transaction.ts (retried on deadlock / serialization failure).
 */
export async function withIdempotency<T>(
  db: Database,
  claim: IdempotencyClaim | undefined,
  write: (tx: Db) => Promise<T | AfterCommit<T>>,
  finishing?: Finishing<T>,
  codec?: RecordCodec<T>,
  plan?: () => Promise<OneStatement<T>>,
): Promise<Replayable<T>> {
  if (plan) {
    // The one-statement path first; anything it does not answer goes to the transactional path.
    let planned: OneStatement<T> | undefined;
    try {
      planned = await plan();
    } catch (err) {
      // A refusal while planning (404 …) is final without a key; with one, the key may hold a
      // response to replay (or a mismatch to report) first: the transactional path decides.
      if (!claim || !(err instanceof AppError)) throw err;
    }
    if (planned) {
      // Resolved keys are set at the top level of the stored JSON: a codec's record has none.
      if (codec && planned.resolved?.length)
        throw new Error("a one-statement plan with resolved columns cannot store its response through a codec");
      const stored = JSON.stringify(codec ? { [REBUILD]: codec.store(planned.body) } : planned.body);
      // The statement sets resolved keys into the stored JSON: a response large enough to be kept
      // deflated (a lead with long notes) takes the transactional path, which stores it encoded.
      if (!claim || Buffer.byteLength(stored) <= DEFLATE_ABOVE_BYTES) {
        try {
          const written = await writeInOneStatement(db, claim, planned, stored);
          if (written !== undefined) return { body: written, replayed: false };
        } catch (err) {
          if (!sqlStates(err).some((c) => FALL_BACK_STATES.test(c))) throw err;
        }
      }
    }
  }
  if (!claim) {
    const out = await transaction(db.prisma, (tx) => write(tx));
    return { body: out instanceof AfterCommit ? await out.finish(db.prisma) : out, replayed: false };
  }
  const encode = (body: T) => storedText(codec, body);
  const decode = async (conn: Db, raw: unknown): Promise<T> => {
    const stored = inflated(raw);
    return codec && stored && typeof stored === "object" && REBUILD in stored
      ? codec.rebuild(conn, (stored as Record<string, unknown>)[REBUILD])
      : (stored as T);
  };
  const staleAfterMs = finishing?.staleAfterMs ?? 60_000;
  const deadline = Date.now() + staleAfterMs + 30_000;
  let retries = 0;
  for (;;) {
    const step = await transaction(db.prisma, async (tx): Promise<Step<T>> => {
      const claimed = await tx.$queryRaw<{ id: string }[]>`
        INSERT INTO ${CLAIM_INTO} VALUES (${claimValues(claim, 0, Prisma.sql`'{}'::jsonb`)}) ${CLAIM_CONFLICT} RETURNING "id"`;
      if (claimed.length === 0) {
        const [existing] = await tx.$queryRaw<
          {
            id: string;
            fingerprint: string;
            statusCode: number;
            responseBody: unknown;
            expired: boolean;
            stale: boolean;
          }[]
        >`
          SELECT "id", "fingerprint", "statusCode", "responseBody", "expiresAt" <= now() AS "expired",
                 "createdAt" <= now() - make_interval(secs => ${staleAfterMs / 1000}) AS "stale"
            FROM "IdempotencyRecord"
           WHERE "tenantId" = ${claim.tenantId}::uuid AND "apiKeyId" = ${claim.apiKeyId}::uuid AND "endpoint" = ${claim.endpoint} AND "key" = ${claim.key}`;
        // Purged since the INSERT saw it: claim again.
        if (!existing) return { kind: "retry" };
        if (!existing.expired) {
          if (existing.fingerprint !== claim.fingerprint)
            throw new AppError(
              "IDEMPOTENCY_KEY_REUSE_MISMATCH",
              "This Idempotency-Key was used with a different request body",
            );
          if (existing.statusCode !== 0)
            return { kind: "done", body: await decode(tx, existing.responseBody), replayed: true };
          // Unfinished: still being finished elsewhere (wait), or abandoned (finish it here, once).
          if (!finishing || !existing.stale) return { kind: "wait" };
          const [locked] = await tx.$queryRaw<{ statusCode: number; responseBody: { pending?: unknown } | null }[]>`
            SELECT "statusCode", "responseBody" FROM "IdempotencyRecord" WHERE "tenantId" = ${claim.tenantId}::uuid AND "id" = ${existing.id}::uuid FOR UPDATE`;
          if (!locked) return { kind: "retry" };
          if (locked.statusCode !== 0)
            return { kind: "done", body: await decode(tx, locked.responseBody), replayed: true };
          const body = await finishing.recover(tx, locked.responseBody?.pending ?? {});
          await tx.$executeRaw`UPDATE "IdempotencyRecord" SET "statusCode" = 201, "responseBody" = ${encode(body)}::jsonb
            WHERE "tenantId" = ${claim.tenantId}::uuid AND "id" = ${existing.id}::uuid`;
          return { kind: "done", body, replayed: true };
        }
        // Expired but not yet purged: take the key over — only while it is still expired. A concurrent
        // take-over holds the row until it commits; this UPDATE then re-reads it, finds it live and
        // matches nothing, and the claim starts again (and replays or waits for that request).
        const taken = await tx.$queryRaw<{ id: string }[]>`
          UPDATE "IdempotencyRecord" SET "fingerprint" = ${claim.fingerprint}, "statusCode" = 0, "responseBody" = '{}'::jsonb,
                 "createdAt" = now(), "expiresAt" = now() + make_interval(secs => ${claim.ttlSeconds})
           WHERE "tenantId" = ${claim.tenantId}::uuid AND "id" = ${existing.id}::uuid AND "expiresAt" <= now()
          RETURNING "id"`;
        if (taken.length === 0) return { kind: "retry" };
        claimed.push(taken[0]!);
      }
      const id = claimed[0]!.id;
      const out = await write(tx);
      if (out instanceof AfterCommit) {
        await tx.$executeRaw`UPDATE "IdempotencyRecord" SET "responseBody" = ${JSON.stringify({ pending: out.note })}::jsonb
          WHERE "tenantId" = ${claim.tenantId}::uuid AND "id" = ${id}::uuid`;
        return { kind: "finish", id, after: out };
      }
      await tx.$executeRaw`UPDATE "IdempotencyRecord" SET "statusCode" = 201, "responseBody" = ${encode(out)}::jsonb WHERE "tenantId" = ${claim.tenantId}::uuid AND "id" = ${id}::uuid`;
      return { kind: "done", body: out, replayed: false };
    });
    if (step.kind === "done") return { body: step.body, replayed: step.replayed };
    if (step.kind === "retry") {
      if (++retries > MAX_CLAIM_RETRIES)
        throw new AppError(
          "SERVICE_UNAVAILABLE",
          "The Idempotency-Key could not be claimed because of concurrent use; retry shortly",
        );
      continue;
    }
    if (step.kind === "finish") {
      const body = await step.after.finish(db.prisma);
      const stored = await db.prisma.$queryRaw<{ id: string }[]>`
        UPDATE "IdempotencyRecord" SET "statusCode" = 201, "responseBody" = ${encode(body)}::jsonb
         WHERE "tenantId" = ${claim.tenantId}::uuid AND "id" = ${step.id}::uuid AND "statusCode" = 0 RETURNING "id"`;
      if (stored.length === 0) {
        // A duplicate finished it first (this request outlived staleAfterMs): answer what it stored.
        const [rec] = await db.prisma.$queryRaw<
          { responseBody: unknown }[]
        >`SELECT "responseBody" FROM "IdempotencyRecord" WHERE "tenantId" = ${claim.tenantId}::uuid AND "id" = ${step.id}::uuid`;
        if (rec) return { body: await decode(db.prisma, rec.responseBody), replayed: false };
      }
      return { body, replayed: false };
    }
    if (Date.now() > deadline)
      throw new AppError(
        "SERVICE_UNAVAILABLE",
        "The original request with this Idempotency-Key is still in progress; retry shortly",
      );
    await sleep(POLL_MS);
  }
}

/** Deletes expired records of every tenant (a maintenance sweep, not a request path); returns how many. */
export async function purgeExpiredIdempotencyRecords(db: Database): Promise<number> {
  return db.prisma.$executeRaw`DELETE FROM "IdempotencyRecord" WHERE "expiresAt" <= now()`;
}
