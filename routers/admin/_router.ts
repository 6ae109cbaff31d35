// The platform-admin router (the admin CLI's verbs over tRPC). NOT part of appRouter: mounted only
// at /trpc-admin behind the internal token (rest/trpc.ts).
import { createKey } from "./createKey.js";
import { demoKey } from "./demoKey.js";
import { inboundMessage } from "./inboundMessage.js";
import { loadFixture } from "./loadFixture.js";
import { revokeKey } from "./revokeKey.js";
import { setPlan } from "./setPlan.js";
import { setPlanLimits } from "./setPlanLimits.js";
import { setTenantLimits } from "./setTenantLimits.js";
import { adminRouterBuilder } from "./trpc.js";

export const adminRouter = adminRouterBuilder({
  loadFixture,
  createKey,
  revokeKey,
  setPlan,
  setPlanLimits,
  setTenantLimits,
  inboundMessage,
  demoKey,
});

export type AdminRouter = typeof adminRouter;
