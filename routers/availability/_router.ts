import { router } from "../trpc.js";

export const availabilityRouter = router({});
