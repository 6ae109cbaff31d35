// admin set-tenant-limits: a tenant's own quotas, overriding its plan's; `limits: null` clears them
// (the CLI's `clear`).
import { z } from "zod";
import { setTenantLimits as set } from "../../server/admin/operations.js";
import { Count } from "./schemas.js";
import { adminProcedure } from "./trpc.js";

export const setTenantLimits = adminProcedure
  .input(
    z
      .object({ tenantId: z.string(), limits: z.object({ perMinute: Count, perDay: Count }).strict().nullable() })
      .strict(),
  )
  .mutation(({ ctx, input }) =>
    input.limits
      ? set(ctx.services.db, input.tenantId, String(input.limits.perMinute), String(input.limits.perDay))
      : set(ctx.services.db, input.tenantId, "clear"),
  );
