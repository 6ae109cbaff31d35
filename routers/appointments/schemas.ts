// Appointment: the shared input pieces, and the mapping of the database-held invariants (the
// "Appointment_no_overlap" exclusion constraint and the "Appointment_ends_after_starts" CHECK) to
// their API errors. The public object, the row and the mapper: model/appointment.ts.
import { z } from "zod";
import { Prisma } from "../../generated/prisma/client.js";
import { dbViolation, isExclusionViolation } from "../../server/db/errors.js";
import { AppError, validation } from "../../server/errors.js";
import type { Db } from "../../server/db/client.js";
import { APPOINTMENT_STATUSES, type AppointmentStatus } from "../../model/appointment.js";

export const isAppointmentStatus = (s: string): s is AppointmentStatus =>
  (APPOINTMENT_STATUSES as readonly string[]).includes(s);

/** Maximum length of `notes` (the spec leaves it open). */
export const NOTES_MAX = 10_000;
export const Notes = z.string().max(NOTES_MAX);

export const OVERLAP_CONSTRAINT = "Appointment_no_overlap";
export const ORDER_CONSTRAINT = "Appointment_ends_after_starts";

export function overlapError(details: Record<string, unknown> = {}) {
  return new AppError(
    "APPOINTMENT_OVERLAP",
    "The assigned user already has a scheduled appointment that overlaps this time range",
    details,
  );
}

export function orderError() {
  return validation("endsAt must be after startsAt", {
    fields: [{ field: "endsAt", code: "invalid_range", message: "must be after startsAt" }],
  });
}

/**
 * Runs a write and maps the database-held invariants: the exclusion constraint → 409
 * APPOINTMENT_OVERLAP, the order CHECK → 422. Anything else is rethrown untouched.
 */
export async function guardAppointmentWrite<T>(
  write: () => Promise<T>,
  details: Record<string, unknown> = {},
): Promise<T> {
  try {
    return await write();
  } catch (err) {
    if (isExclusionViolation(err, OVERLAP_CONSTRAINT)) throw overlapError(details);
    const v = dbViolation(err);
    if (v?.sqlState === "23514" && v.constraint === ORDER_CONSTRAINT) throw orderError();
    throw err;
  }
}

/**
 * Serializes the appointment writes of one user: a transaction-scoped advisory lock on
 * (tenant, user), taken first in every create and every PATCH that writes. Without it two concurrent
 * writers of overlapping ranges can deadlock inside the exclusion constraint (each waiting for the
 * other's uncommitted row); with it the second writer waits, then sees the first one's row.
 * The exclusion constraint stays the guard. Must run inside a transaction.
 */
export async function lockUserCalendar(db: Db, tenantId: string, userId: string): Promise<void> {
  await db.$queryRaw(calendarLockSql(tenantId, userId));
}

/**
 * The calendar lock as a query of one row ("locked" = 1), for lockUserCalendar and as the first CTE of
 * a one-statement write: pg_advisory_xact_lock(…) in a CTE of its own (taken once, before anything
 * that reads "locked"), in a query that names the tenant's appointments without reading them
 * (`locked = 1` holds). An advisory lock belongs to the node whose backend takes it, and on Citus a
 * query that names no table runs on the coordinator while one that names the tenant's rows runs on
 * the worker that holds them: this form is taken on that worker in every statement it is part of
 * (lockUserCalendar's, a create's single statement, and one with an Idempotency-Key claim, where Citus
 * plans the CTE on its own), so every writer of a calendar waits for the same lock. On one PostgreSQL
 * it is the same lock either way.
 */
export function calendarLockSql(tenantId: string, userId: string): Prisma.Sql {
  return Prisma.sql`
    WITH "lock" AS (SELECT 1 AS "locked" FROM pg_advisory_xact_lock(hashtext('appointments'), hashtext(${`${tenantId}:${userId}`})))
    SELECT k."locked" FROM "lock" k
     WHERE k."locked" = 1 OR EXISTS (SELECT 1 FROM "Appointment" a WHERE a."tenantId" = ${tenantId}::uuid AND a."assignedUserId" = ${userId}::uuid)`;
}

/**
 * The scheduled appointments of `userId` intersecting [startsAt, endsAt) (half-open), as a WHERE
 * condition on alias `a`: written as the exclusion constraint's own range overlap, so that it is an
 * index scan of "Appointment_no_overlap" (O(log n) in the user's appointments), not a range scan of
 * every appointment of the user that starts before `endsAt`.
 */
export function overlapSql(tenantId: string, userId: string, startsAt: Date, endsAt: Date): Prisma.Sql {
  return Prisma.sql`a."tenantId" = ${tenantId}::uuid AND a."assignedUserId" = ${userId}::uuid AND a."status" = 'scheduled'
    AND tstzrange(a."startsAt", a."endsAt", '[)') && tstzrange(${startsAt}::timestamptz, ${endsAt}::timestamptz, '[)')`;
}

/**
 * A scheduled appointment of `userId` intersecting [startsAt, endsAt) (half-open), other than
 * `exceptId`. Only for a friendlier 409 (it names the blocker); the constraint is the guard.
 */
export async function findOverlap(
  db: Db,
  where: { tenantId: string; userId: string; startsAt: Date; endsAt: Date; exceptId?: string },
): Promise<{ id: string } | null> {
  const except = where.exceptId ? Prisma.sql`AND a."id" <> ${where.exceptId}::uuid` : Prisma.empty;
  const [blocker] = await db.$queryRaw<{ id: string }[]>`
    SELECT a."id" FROM "Appointment" a
     WHERE ${overlapSql(where.tenantId, where.userId, where.startsAt, where.endsAt)} ${except}
     ORDER BY a."startsAt" ASC, a."id" ASC LIMIT 1`;
  return blocker ?? null;
}
