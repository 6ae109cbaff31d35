import { router } from "../trpc.js";

export const conversationsRouter = router({});
