// The app router: every public operation, one procedure file each, grouped by resource.
import { appointmentsRouter } from "./appointments/_router.js";
import { availabilityRouter } from "./availability/_router.js";
import { changesRouter } from "./changes/_router.js";
import { contactsRouter } from "./contacts/_router.js";
import { conversationsRouter } from "./conversations/_router.js";
import { leadsRouter } from "./leads/_router.js";
import { getMe } from "./me/get.js";
import { ticketsRouter } from "./tickets/_router.js";
import { router } from "./trpc.js";

export const appRouter = router({
  me: router({ get: getMe }),
  leads: leadsRouter,
  contacts: contactsRouter,
  conversations: conversationsRouter,
  appointments: appointmentsRouter,
  availability: availabilityRouter,
  tickets: ticketsRouter,
  changes: changesRouter,
});

export type AppRouter = typeof appRouter;
