// The app router: every public operation, one procedure file each, grouped by resource.
import { appointmentsRouter } from "./appointments/_router.js";
import { availabilityRouter } from "./availability/_router.js";
import { changesRouter } from "./changes/_router.js";
import { channelsRouter } from "./channels/_router.js";
import { contactsRouter } from "./contacts/_router.js";
import { conversationsRouter } from "./conversations/_router.js";
import { leadsRouter } from "./leads/_router.js";
import { getMe } from "./me/get.js";
import { stagesRouter } from "./stages/_router.js";
import { templatesRouter } from "./templates/_router.js";
import { ticketsRouter } from "./tickets/_router.js";
import { router } from "./trpc.js";
import { usersRouter } from "./users/_router.js";

export const appRouter = router({
  me: router({ get: getMe }),
  leads: leadsRouter,
  contacts: contactsRouter,
  conversations: conversationsRouter,
  appointments: appointmentsRouter,
  availability: availabilityRouter,
  tickets: ticketsRouter,
  changes: changesRouter,
  // The tenant's reference data: what the ids and names in the objects above mean.
  stages: stagesRouter,
  users: usersRouter,
  channels: channelsRouter,
  templates: templatesRouter,
});

export type AppRouter = typeof appRouter;
