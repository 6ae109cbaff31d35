import { router } from "../trpc.js";
import { createAppointment } from "./create.js";
import { listAppointments } from "./list.js";
import { updateAppointment } from "./update.js";
import { getAppointment } from "./get.js";

export const appointmentsRouter = router({
  list: listAppointments,
  create: createAppointment,
  get: getAppointment,
  update: updateAppointment,
});
