// The availability response and its query pieces.
import { z } from "zod";
import { DateInput, Timestamp } from "../_lib/schemas.js";

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

/** A calendar date YYYY-MM-DD that exists, years 0001–9999 (the shared input piece). */
export const CalendarDate = DateInput;

export const SlotObject = z
  .object({
    startsAt: Timestamp,
    endsAt: Timestamp,
    /** Additive: the user the slot belongs to. */
    userId: z.string(),
  })
  .meta({ id: "AvailabilitySlot" });

export const AvailabilityObject = z
  .object({
    slots: z.array(SlotObject),
    degraded: z.boolean(),
    degradedReason: z.enum(DEGRADED_REASONS).nullable(),
  })
  .meta({ id: "Availability" });
export type AvailabilityObject = z.infer<typeof AvailabilityObject>;
