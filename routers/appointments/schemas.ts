// Appointment: the public object, its serializer, the shared input pieces, and the mapping of the
// database-held invariants (the "Appointment_no_overlap" exclusion constraint and the
// "Appointment_ends_after_starts" CHECK) to their API errors.
import { z } from "zod";
import { Prisma } from "../../generated/prisma/client.js";
import { dbViolation, isExclusionViolation } from "../../server/db/errors.js";
import { AppError, validation } from "../../server/errors.js";
import type { Db } from "../../server/db/client.js";
import { iso, Timestamp, type Instant } from "../_lib/schemas.js";

export const APPOINTMENT_STATUSES = ["scheduled", "cancelled", "completed", "no_show"] as const;
export const AppointmentStatus = z.enum(APPOINTMENT_STATUSES, {
  message: `must be one of ${APPOINTMENT_STATUSES.join(", ")}`,
});
export type AppointmentStatus = (typeof APPOINTMENT_STATUSES)[number];
export const isAppointmentStatus = (s: string): s is AppointmentStatus => (APPOINTMENT_STATUSES as readonly string[]).includes(s);

/** Maximum length of `notes` (the spec leaves it open). */
export const NOTES_MAX = 10_000;
export const Notes = z.string().max(NOTES_MAX);

export const AppointmentObject = z.object({
  id: z.string(),
  assignedUserId: z.string(),
  customerId: z.string().nullable(),
  conversationId: z.string().nullable(),
  leadId: z.string().nullable(),
  title: z.string(),
  appointmentType: z.string(),
  startsAt: Timestamp,
  endsAt: Timestamp,
  status: AppointmentStatus,
  source: z.string(),
  notes: z.string().nullable(),
  createdAt: Timestamp,
  updatedAt: Timestamp,
}).meta({ id: "Appointment" });
export type AppointmentObject = z.infer<typeof AppointmentObject>;

export interface AppointmentRow {
  id: string;
  assignedUserId: string;
  customerId: string | null;
  conversationId: string | null;
  leadId: string | null;
  title: string;
  appointmentType: string;
  startsAt: Instant;
  endsAt: Instant;
  /** The "AppointmentStatus" domain: one of APPOINTMENT_STATUSES (the database checks it). */
  status: string;
  source: string;
  notes: string | null;
  createdAt: Instant;
  updatedAt: Instant;
}

/** The columns of an AppointmentRow, as the list and the changes feed read them (unqualified). */
export const APPOINTMENT_COLUMNS = Prisma.sql`"id", "assignedUserId", "customerId", "conversationId", "leadId", "title", "appointmentType",
  "startsAt", "endsAt", "status", "source", "notes", "createdAt", "updatedAt"`;

export const toAppointment = (a: AppointmentRow): AppointmentObject => ({
  id: a.id,
  assignedUserId: a.assignedUserId,
  customerId: a.customerId,
  conversationId: a.conversationId,
  leadId: a.leadId,
  title: a.title,
  appointmentType: a.appointmentType,
  startsAt: iso(a.startsAt),
  endsAt: iso(a.endsAt),
  status: a.status as AppointmentStatus,
  source: a.source,
  notes: a.notes,
  createdAt: iso(a.createdAt),
  updatedAt: iso(a.updatedAt),
});

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
export async function guardAppointmentWrite<T>(write: () => Promise<T>, details: Record<string, unknown> = {}): Promise<T> {
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
 *
 * The statement names the tenant's appointments (never read: `locked = 1` holds) so that it runs
 * where the one-statement create takes the same lock: on Citus a statement runs on the node of the
 * tenant's shard when it names a distributed table pinned to the tenant, and on the coordinator when it
 * names no table — an advisory lock is per node, so a lock taken without the table would not exclude
 * the create's (docs/scaling.md, "Citus"). On one PostgreSQL it is the same lock either way.
 */
export async function lockUserCalendar(db: Db, tenantId: string, userId: string): Promise<void> {
  await db.$queryRaw`
    WITH "calendar" AS (SELECT 1 AS "locked" FROM ${calendarLockSql(tenantId, userId)})
    SELECT l."locked" FROM "calendar" l
     WHERE l."locked" = 1 OR EXISTS (SELECT 1 FROM "Appointment" a WHERE a."tenantId" = ${tenantId}::uuid AND a."assignedUserId" = ${userId}::uuid)`;
}

/** The calendar lock as a FROM item (`pg_advisory_xact_lock(…)`), for lockUserCalendar and one-statement writes. */
export function calendarLockSql(tenantId: string, userId: string): Prisma.Sql {
  return Prisma.sql`pg_advisory_xact_lock(hashtext('appointments'), hashtext(${`${tenantId}:${userId}`}))`;
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
