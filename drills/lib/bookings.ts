// Rounds of bookings racing for one slot (drills 9 and 10): each round's half-hour slot, the racing
// POST /public/v1/appointments, and the targets on what the rounds left in the database.
import type pg from "pg";
import { envelopeProblems, type Res } from "./http.js";
import type { Report } from "./result.js";

/** One round: the slot raced for and every booker's answer. */
export interface BookingRound {
  startsAt: string;
  endsAt: string;
  results: Res[];
}

const DAY_MS = 86_400_000;
const SLOT_MS = 30 * 60_000;

/** The rounds' day: midnight (UTC) `days` days after the end of today. */
export const bookingDay = (days: number): number => Math.ceil(Date.now() / DAY_MS) * DAY_MS + days * DAY_MS;

/** The `n`th half-hour slot of `day` (from bookingDay). */
export const slotOf = (day: number, n: number): { startsAt: string; endsAt: string } => ({
  startsAt: new Date(day + n * SLOT_MS).toISOString(),
  endsAt: new Date(day + (n + 1) * SLOT_MS).toISOString(),
});

/**
 * `bookers` bookings of the round's slot for one user at once, titled `${title}.${b}`; `post(b, body)`
 * sends booker b's (the drill picks the instance and the key). The answers, in booker order.
 */
export function raceForSlot(
  round: BookingRound,
  bookers: number,
  userId: string,
  title: string,
  post: (b: number, body: Record<string, unknown>) => Promise<Res>,
): Promise<Res[]> {
  return Promise.all(
    Array.from({ length: bookers }, (_, b) =>
      post(b, {
        assignedUserId: userId,
        title: `${title}.${b}`,
        appointmentType: "visit",
        startsAt: round.startsAt,
        endsAt: round.endsAt,
      }),
    ),
  );
}

/**
 * The bookings' targets: at most one 201 per slot, every acknowledged booking stored, no two scheduled
 * appointments of one user overlapping (any tenant), and every answer a 201, a 409 APPOINTMENT_OVERLAP
 * or one the drill's faults explain (`unavailable`).
 */
export async function checkBookings(
  db: pg.Client,
  rounds: BookingRound[],
  report: Report,
  unavailable: (res: Res) => boolean,
) {
  const doubleRounds = rounds.filter((r) => r.results.filter((x) => x.status === 201).length > 1).length;
  const badAnswers = rounds
    .flatMap((r) => r.results)
    .filter(
      (x) =>
        !(
          x.status === 201 ||
          unavailable(x) ||
          (x.status === 409 && envelopeProblems(x, { error: "APPOINTMENT_OVERLAP" }).length === 0)
        ),
    );
  const overlaps = (
    await db.query(`SELECT count(*)::int AS n FROM "Appointment" a JOIN "Appointment" b
        ON a."tenantId" = b."tenantId" AND a."assignedUserId" = b."assignedUserId" AND a."id" < b."id"
       WHERE a."status" = 'scheduled' AND b."status" = 'scheduled' AND a."startsAt" < b."endsAt" AND b."startsAt" < a."endsAt"`)
  ).rows[0].n as number;
  const bookedIds = rounds.flatMap((r) => r.results.filter((x) => x.status === 201).map((x) => x.body.id as string));
  const storedBookings = (
    await db.query(`SELECT count(*)::int AS n FROM "Appointment" WHERE "id" = ANY($1::uuid[])`, [bookedIds])
  ).rows[0].n as number;
  const doubleBookings = doubleRounds + overlaps;
  const wonRounds = rounds.filter((r) => r.results.some((x) => x.status === 201)).length;
  report.check(
    doubleBookings === 0,
    `double bookings: ${doubleRounds} rounds with two 201s, ${overlaps} overlapping scheduled pairs`,
  );
  report.check(
    storedBookings === bookedIds.length,
    `${bookedIds.length - storedBookings} acknowledged bookings missing`,
  );
  report.check(
    badAnswers.length === 0,
    `bookings answered ${badAnswers
      .slice(0, 3)
      .map((x) => `${x.status} ${x.body?.error ?? x.error ?? ""}`)
      .join(", ")}`,
  );
  return { bookedIds, doubleBookings, wonRounds };
}
