// admin revoke-key: revoke an API key (idempotent: an already revoked key keeps its revokedAt).
import { z } from "zod";
import { revokeKey as revoke } from "../../server/admin/operations.js";
import { adminProcedure } from "./trpc.js";

export const revokeKey = adminProcedure
  .input(z.object({ keyId: z.string() }).strict())
  .mutation(({ ctx, input }) => revoke(ctx.services.db, input.keyId));
