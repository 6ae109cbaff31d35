// admin create-key: a new API key for a user of a tenant; returns the raw key once.
import { z } from "zod";
import { createKey as create } from "../../server/admin/operations.js";
import { adminProcedure } from "./trpc.js";

export const CreateKeyInput = z
  .object({
    tenantId: z.string(),
    ownerUserId: z.string(),
    /** "all", a list of scopes, or the CLI's comma-separated form. */
    scopes: z.union([z.string(), z.array(z.string())]),
    /** ISO 8601 date-time; omitted: never expires. */
    expiresAt: z.string().optional(),
  })
  .strict();

export const createKey = adminProcedure
  .input(CreateKeyInput)
  .mutation(({ ctx, input }) =>
    create(
      ctx.services.db,
      input.tenantId,
      input.ownerUserId,
      Array.isArray(input.scopes) ? input.scopes.join(",") : input.scopes,
      input.expiresAt,
    ),
  );
