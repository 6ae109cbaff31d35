// admin set-plan-limits: the default per-minute / per-day quotas of a plan.
import { z } from "zod";
import { setPlanLimits as set } from "../../server/admin/operations.js";
import { Count, Plan } from "./schemas.js";
import { adminProcedure } from "./trpc.js";

export const setPlanLimits = adminProcedure
  .input(z.object({ plan: Plan, perMinute: Count, perDay: Count }).strict())
  .mutation(({ ctx, input }) => set(ctx.services.db, input.plan, String(input.perMinute), String(input.perDay)));
