// The changes feed's database mechanics (docs/architecture.md, "Changes feed"): the
// sequencer that places committed changes at their tenant's next positions, and the retention purge
// of tombstones. Rows are written by the "changes_capture" trigger function only
// (its current body: prisma/migrations/20261201000000_local_prepared); GET /changes (routers/changes/list.ts) runs a
// sequencer step for its tenant before reading, and every instance runs a global step every second
// (server/main.ts), so the backlog stays small.
import { Prisma, type PrismaClient } from "../generated/prisma/client.js";
import { transaction } from "./db/transaction.js";

/** pg_advisory_xact_lock key that serialises sequencer steps (transaction-scoped: PgBouncer-safe). */
export const SEQUENCER_LOCK = 7_245_015;
/** Pending rows placed by one sequencer step. */
export const SEQUENCE_BATCH = 10_000;
/** Tokens older than this are refused (422, details.code "since_expired"). */
export const CHANGES_RETENTION_DAYS = 30;
export const CHANGES_RETENTION_MS = CHANGES_RETENTION_DAYS * 86_400_000;
/**
 * Tombstones are purged one day after the retention: a token is accepted while it is younger than
 * the retention, and every tombstone it may still have to deliver was written at most a writer
 * transaction's duration before the token was issued (docs/decisions/api.md, "Changes feed").
 */
export const TOMBSTONE_KEEP_MS = CHANGES_RETENTION_MS + 86_400_000;
/** Tombstones deleted per statement, and statements per purge run. */
const PURGE_BATCH = 10_000;
const PURGE_ROUNDS = 20;

/**
 * One sequencer step for one tenant: in one short transaction under the tenant's advisory lock, gives
 * up to `batch` of its pending rows the tenant's next positions, oldest change first. Rows locked by
 * a writer that is changing them again are skipped (they are placed once it commits). Returns the
 * number of rows placed.
 *
 * The lock is taken by its own statement, so the placing statement's snapshot is taken after it: it
 * sees everything the tenant's previous step committed (its head included). A tenant's steps are
 * serialised, so a reader that sees a step's positions sees every earlier step's too. Positions are
 * per tenant, so steps of different tenants need no order between them.
 *
 * Every statement pins the tenant: on Citus the step runs on the node that holds the tenant's
 * co-located ChangeLog and ChangeHead shards (and the writers' ChangeLog rows, written by the capture
 * trigger in the writers' transactions on that same node), so "committed before the step's snapshot"
 * means there exactly what it means on one PostgreSQL (docs/scaling.md, "Citus").
 */
export async function sequenceChanges(
  prisma: PrismaClient,
  opts: { tenantId: string; batch?: number },
): Promise<number> {
  const batch = opts.batch ?? SEQUENCE_BATCH;
  const tenantId = opts.tenantId;
  return transaction(prisma, async (tx) => {
    await tx.$queryRaw`SELECT 1 AS locked FROM pg_advisory_xact_lock(${SEQUENCER_LOCK}::int, hashtext(${tenantId}))`;
    // One statement, every part of it pinned to the tenant (Citus routes it, whole, to the tenant's
    // shard: no part of it is planned apart). The head is an UPDATE: an INSERT … SELECT (an upsert
    // from the batch) would be planned by Citus as separate distributed steps. A tenant's first step
    // finds no head row: it is created (once per tenant) and the step runs again.
    const step = () => tx.$queryRaw<{ n: number; heads: number; pending: number }[]>`
      WITH batch AS (
        SELECT "type", "objectId", "changedAt"
          FROM "ChangeLog"
         WHERE "tenantId" = ${tenantId}::uuid AND "pos" IS NULL
         ORDER BY "changedAt"
         LIMIT ${batch}
           FOR UPDATE SKIP LOCKED
      ), numbered AS (
        SELECT b."type", b."objectId",
               row_number() OVER (ORDER BY b."changedAt", b."type", b."objectId") AS rn,
               count(*) OVER () AS cnt
          FROM batch b
      ), head AS (
        UPDATE "ChangeHead" SET "pos" = "pos" + (SELECT count(*) FROM batch)
         WHERE "tenantId" = ${tenantId}::uuid AND EXISTS (SELECT 1 FROM batch)
        RETURNING "pos"
      ), placed AS (
        UPDATE "ChangeLog" c
           SET "pos" = h."pos" - n.cnt + n.rn
          FROM numbered n, head h
         WHERE c."tenantId" = ${tenantId}::uuid AND c."type" = n."type" AND c."objectId" = n."objectId"
        RETURNING 1
      )
      SELECT (SELECT count(*) FROM placed)::int AS n, (SELECT count(*) FROM head)::int AS heads,
             (SELECT count(*) FROM batch)::int AS pending`;
    let [r] = await step();
    if (r && r.pending > 0 && r.heads === 0) {
      await tx.$executeRaw`INSERT INTO "ChangeHead" ("tenantId", "pos") VALUES (${tenantId}::uuid, 0)
                           ON CONFLICT ("tenantId") DO NOTHING`;
      [r] = await step();
    }
    return r?.n ?? 0;
  });
}

/** Whether `tenantId` has committed changes not yet placed: one probe of the pending index. */
export async function hasPendingChanges(prisma: PrismaClient, tenantId: string): Promise<boolean> {
  const r = await prisma.$queryRaw<{ pending: boolean }[]>`
    SELECT EXISTS (SELECT 1 FROM "ChangeLog" WHERE "tenantId" = ${tenantId}::uuid AND "pos" IS NULL) AS "pending"`;
  return r[0]?.pending === true;
}

/**
 * A tenant's feed state for the long-poll probe (server/wakeups.ts): its head and whether committed
 * changes wait to be placed, as one string that moves whenever the feed does. One statement, pinned
 * to the tenant (on Citus, on its worker).
 */
export async function feedState(prisma: PrismaClient, tenantId: string): Promise<string> {
  const [r] = await prisma.$queryRaw<{ head: bigint | number | null; pending: boolean }[]>`
    SELECT (SELECT "pos" FROM "ChangeHead" WHERE "tenantId" = ${tenantId}::uuid) AS "head",
           EXISTS (SELECT 1 FROM "ChangeLog" WHERE "tenantId" = ${tenantId}::uuid AND "pos" IS NULL) AS "pending"`;
  return `${r?.head ?? 0}:${r?.pending === true}`;
}

/** Tenants read per round of the background step. */
const PENDING_TENANTS = 100;

/**
 * The background step (every instance, every second): places the pending changes of every tenant
 * that has some, tenant by tenant (up to `maxRounds` × PENDING_TENANTS tenants per call; the next
 * call continues). A cheap probe first: an idle feed costs one scan of the pending index (on Citus,
 * one per shard), no transaction and no lock.
 */
export async function sequencePending(prisma: PrismaClient, maxRounds = 10): Promise<number> {
  let total = 0;
  for (let round = 0; round < maxRounds; round++) {
    const tenants = await prisma.$queryRaw<{ tenantId: string }[]>`
      SELECT DISTINCT "tenantId"::text AS "tenantId" FROM "ChangeLog" WHERE "pos" IS NULL LIMIT ${PENDING_TENANTS}`;
    let full = false;
    for (const { tenantId } of tenants) {
      const n = await sequenceChanges(prisma, { tenantId });
      total += n;
      if (n === SEQUENCE_BATCH) full = true;
    }
    if (tenants.length < PENDING_TENANTS && !full) break;
  }
  return total;
}

/**
 * Retention: deletes placed tombstones written before `now` − TOMBSTONE_KEEP_MS, in bounded
 * statements. (Upsert rows are never purged: there is one per object, storage is bounded by the
 * objects.) Returns the number deleted.
 */
export async function purgeTombstones(prisma: PrismaClient, now: Date): Promise<number> {
  const cutoff = new Date(now.getTime() - TOMBSTONE_KEEP_MS);
  // The conditions are repeated on the deleted row itself: a tombstone rewritten meanwhile (the
  // contact changed again) is re-checked in its new version and kept.
  const tombstone = Prisma.sql`"action" = 'delete' AND "pos" IS NOT NULL
                               AND "changedAt" < ${cutoff.toISOString()}::timestamptz`;
  let total = 0;
  let statements = 0;
  // Tenant by tenant (each DELETE pins one tenant: one shard on Citus), bounded statements.
  for (let round = 0; round < PURGE_ROUNDS && statements < PURGE_ROUNDS * 5; round++) {
    const tenants = await prisma.$queryRaw<{ tenantId: string }[]>`
      SELECT DISTINCT "tenantId"::text AS "tenantId" FROM "ChangeLog" WHERE ${tombstone} LIMIT 100`;
    if (tenants.length === 0) break;
    for (const { tenantId } of tenants) {
      const n = await prisma.$executeRaw`
        DELETE FROM "ChangeLog" c
         USING (SELECT "type", "objectId" FROM "ChangeLog" WHERE "tenantId" = ${tenantId}::uuid AND ${tombstone}
           LIMIT ${PURGE_BATCH}) d
         WHERE c."tenantId" = ${tenantId}::uuid AND c."type" = d."type" AND c."objectId" = d."objectId"
           AND ${tombstone}`; // (d has none of these columns: they are c's)
      total += n;
      statements += 1;
    }
  }
  return total;
}
