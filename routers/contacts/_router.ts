import { router } from "../trpc.js";

export const contactsRouter = router({});
