// admin set-plan: change a tenant's plan (starter tenants lose API access on the next request).
import { z } from "zod";
import { setPlan as set } from "../../server/admin/operations.js";
import { Plan } from "./schemas.js";
import { adminProcedure } from "./trpc.js";

export const setPlan = adminProcedure
  .input(z.object({ tenantId: z.string(), plan: Plan }).strict())
  .mutation(({ ctx, input }) => set(ctx.services.db, input.tenantId, input.plan));
