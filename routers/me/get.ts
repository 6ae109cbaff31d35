// GET /public/v1/me — caller introspection. No scope: a valid key of a tenant on an eligible plan.
import { z } from "zod";
import { authed } from "../trpc.js";

export const MeOutput = z
  .object({
    tenantId: z.string(),
    keyPrefix: z.string(),
    scopes: z.array(z.string()),
    plan: z.string(),
    rateLimit: z.object({ perMinute: z.number().int(), perDay: z.number().int() }),
  })
  .meta({ id: "Me" });

export const getMe = authed
  .meta({
    openapi: { method: "GET", path: "/public/v1/me", tags: ["me"], summary: "Caller introspection", protect: true },
    scope: null,
  })
  .input(z.object({}))
  .output(MeOutput)
  .query(({ ctx }) => ({
    tenantId: ctx.caller.tenantId,
    keyPrefix: ctx.caller.keyPrefix,
    scopes: ctx.caller.scopes,
    plan: ctx.caller.plan,
    // The ceilings this very request was checked against (== X-RateLimit-Limit for perMinute).
    rateLimit: { perMinute: ctx.caller.limits.perMinute, perDay: ctx.caller.limits.perDay },
  }));
