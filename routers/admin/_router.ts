// The platform-admin router (the admin CLI's verbs over tRPC). NOT part of appRouter: mounted only
// at /trpc-admin behind the internal token (rest/trpc.ts).
import { createKey } from "./create-key.js";
import { demoKey } from "./demo-key.js";
import { inboundMessage } from "./inbound-message.js";
import { loadFixture } from "./load-fixture.js";
import { revokeKey } from "./revoke-key.js";
import { setPlan } from "./set-plan.js";
import { setPlanLimits } from "./set-plan-limits.js";
import { setTenantLimits } from "./set-tenant-limits.js";
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
