import { router } from "../trpc.js";
import { createAppointment } from "./create.js";
import { listAppointments } from "./list.js";
import { updateAppointment } from "./update.js";

export const appointmentsRouter = router({
  list: listAppointments,
  create: createAppointment,
  update: updateAppointment,
});
