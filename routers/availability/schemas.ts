// The availability response and its query pieces.
import { z } from "zod";
import { DateTime } from "luxon";
import { Timestamp } from "../_lib/schemas.js";

/** Longest range, in calendar days (from and to inclusive). */
export const MAX_RANGE_DAYS = 31;

/**
 * Why an answer is not the full picture (degraded = true):
 * - "no_working_hours": the chosen user has no working hours configured at all, so is never free
 *   (slots is empty).
 * - "invalid_timezone": the tenant's time zone is not a known IANA zone; working hours were read as UTC.
 */
export const DEGRADED_REASONS = ["no_working_hours", "invalid_timezone"] as const;
export type DegradedReason = (typeof DEGRADED_REASONS)[number];

/** A calendar date YYYY-MM-DD that exists (2026-02-30 is rejected). */
export const CalendarDate = z
  .string()
  .regex(/^\d{4}-\d{2}-\d{2}$/, "must be a date in the form YYYY-MM-DD")
  .refine((s) => DateTime.fromISO(s, { zone: "utc" }).isValid, "must be a real calendar date");

export const SlotObject = z.object({
  startsAt: Timestamp,
  endsAt: Timestamp,
  /** Additive: the user the slot belongs to. */
  userId: z.string(),
}).meta({ id: "AvailabilitySlot" });

export const AvailabilityObject = z.object({
  slots: z.array(SlotObject),
  degraded: z.boolean(),
  degradedReason: z.enum(DEGRADED_REASONS).nullable(),
}).meta({ id: "Availability" });
export type AvailabilityObject = z.infer<typeof AvailabilityObject>;
