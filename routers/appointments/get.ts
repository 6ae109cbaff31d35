// GET /public/v1/appointments/{appointment_id} — one appointment (scope tenant:appointments.read).
// Unknown or foreign → 404. Sends its version as the ETag; If-None-Match naming it → 304.
import { z } from "zod";
import { AppointmentObject, toAppointment } from "../../model/appointment.js";
import { Id } from "../_lib/schemas.js";
import { mustExist, owned } from "../_lib/tenant.js";
import { scoped } from "../trpc.js";

export const GetAppointmentInput = z.object({ appointment_id: Id });

export const getAppointment = scoped("tenant:appointments.read")
  .meta({
    errors: ["NOT_FOUND"],
    openapi: {
      method: "GET",
      path: "/public/v1/appointments/{appointment_id}",
      tags: ["appointments"],
      summary: "Get one appointment",
      description:
        "An appointment of the tenant, whatever its status; an unknown or foreign appointment gives 404. " +
        "The `ETag` is the appointment's version; `If-None-Match` naming it answers 304 without a body.",
      protect: true,
    },
  })
  .input(GetAppointmentInput)
  .output(AppointmentObject)
  .query(async ({ ctx, input }) =>
    toAppointment(
      await mustExist(ctx.db.appointment.findFirst({ where: owned(ctx, { id: input.appointment_id }) }), "Appointment"),
    ),
  );
