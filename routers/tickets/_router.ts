import { router } from "../trpc.js";

export const ticketsRouter = router({});
