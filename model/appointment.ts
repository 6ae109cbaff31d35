// Appointment: the public object, its row and the mapper between them.
import { z } from "zod";
import { Timestamp } from "./instants.js";
import { col, defineRow, type RowOf } from "./row.js";

export const APPOINTMENT_STATUSES = ["scheduled", "cancelled", "completed", "no_show"] as const;
export const AppointmentStatus = z.enum(APPOINTMENT_STATUSES, {
  message: `must be one of ${APPOINTMENT_STATUSES.join(", ")}`,
});
export type AppointmentStatus = (typeof APPOINTMENT_STATUSES)[number];

export const AppointmentObject = z
  .object({
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
    version: z
      .number()
      .int()
      .meta({ description: "1 on create, +1 with every write that changes the object; sent as the ETag" }),
    createdAt: Timestamp,
    updatedAt: Timestamp,
  })
  .meta({ id: "Appointment" });
export type AppointmentObject = z.infer<typeof AppointmentObject>;

export const Appointment = defineRow("Appointment", {
  id: col.uuid(),
  assignedUserId: col.uuid(),
  customerId: col.uuid().nullable(),
  conversationId: col.uuid().nullable(),
  leadId: col.uuid().nullable(),
  title: col.text(),
  appointmentType: col.text(),
  startsAt: col.instant(),
  endsAt: col.instant(),
  /** The "AppointmentStatus" domain. */
  status: col.enum(APPOINTMENT_STATUSES),
  source: col.text(),
  notes: col.text().nullable(),
  version: col.int(),
  createdAt: col.instant(),
  updatedAt: col.instant(),
});
export type AppointmentRow = RowOf<typeof Appointment>;

/** An appointment row (or Prisma's Appointment) → the public appointment. */
export const toAppointment = Appointment.toPublic(AppointmentObject, { composed: {} });
