// admin demo-key: a new key of the demo tenant with every scope (the CLI's verb while the embedded
// service holds its folder, server/admin/live.ts), with a curl line at the address this service listens on.
import { z } from "zod";
import { localBaseUrl } from "../../server/admin/demo.js";
import { demoKey as create } from "../../server/admin/operations.js";
import { adminProcedure } from "./trpc.js";

export const demoKey = adminProcedure
  .input(z.object({}).strict().optional())
  .mutation(({ ctx }) => create(ctx.services.db, localBaseUrl(ctx.services.config.host, ctx.services.config.port)));
