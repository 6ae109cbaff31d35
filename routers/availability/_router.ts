import { router } from "../trpc.js";
import { getAvailability } from "./get.js";

export const availabilityRouter = router({
  get: getAvailability,
});
