import { router } from "../trpc.js";

export const appointmentsRouter = router({});
