import { router } from "../trpc.js";

export const leadsRouter = router({});
