// The app router: every public operation, one procedure file each.
import { getMe } from "./me/get.js";
import { router } from "./trpc.js";

export const appRouter = router({
  me: router({ get: getMe }),
});

export type AppRouter = typeof appRouter;
