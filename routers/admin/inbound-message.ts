// admin inbound-message: record a customer message on a conversation as the channel would (role
// user, now — the services' clock), reopening the 24-hour messaging window.
import { z } from "zod";
import { inboundMessage as inbound } from "../../server/admin/operations.js";
import { adminProcedure } from "./trpc.js";

export const inboundMessage = adminProcedure
  .input(z.object({ conversationId: z.string(), text: z.string() }).strict())
  .mutation(({ ctx, input }) => inbound(ctx.services.db, input.conversationId, input.text, ctx.services.now()));
