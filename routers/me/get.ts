// GET /public/v1/me — caller introspection. No scope: a valid key of a tenant on an eligible plan.
import { z } from "zod";
import type { QuotaWindow } from "../../server/limits/quotas.js";
import { authed } from "../trpc.js";

const Window = z
  .object({
    used: z.number().int().describe("Requests counted in the window, this one included"),
    remaining: z.number().int(),
    resetAt: z.string().describe("When the window resets (a new one starts with the next request after it)"),
  })
  .meta({ id: "QuotaWindow" });

export const MeOutput = z
  .object({
    tenantId: z.string(),
    keyPrefix: z.string(),
    scopes: z.array(z.string()),
    plan: z.string(),
    rateLimit: z.object({ perMinute: z.number().int(), perDay: z.number().int() }),
    usage: z
      .object({ minute: Window, day: Window })
      .describe(
        "Each quota window as it stands after this request: used, left and when it resets. A window starts with the key's first request in it (the minute: 60 s; the day: 24 h), not at a clock boundary.",
      ),
  })
  .meta({ id: "Me" });

export const getMe = authed
  .meta({
    openapi: { method: "GET", path: "/public/v1/me", tags: ["me"], summary: "Caller introspection", protect: true },
    scope: null,
  })
  .input(z.object({}))
  .output(MeOutput)
  .query(async ({ ctx }) => {
    // The guard's count of this request when it has both windows (a transport passes it), else a read.
    const counted = ctx.request.quota?.every((w) => w.known !== false) ? ctx.request.quota : undefined;
    const [minute, day] = counted ?? (await ctx.services.quotas.usage(ctx.caller.keyHash, ctx.caller.limits));
    const now = ctx.services.now().getTime();
    const shown = (w: QuotaWindow) => ({
      used: w.used,
      remaining: w.remaining,
      resetAt: new Date(now + w.resetIn * 1000).toISOString(),
    });
    return {
      tenantId: ctx.caller.tenantId,
      keyPrefix: ctx.caller.keyPrefix,
      scopes: ctx.caller.scopes,
      plan: ctx.caller.plan,
      // The ceilings this very request was checked against (== X-RateLimit-Limit for perMinute).
      rateLimit: { perMinute: ctx.caller.limits.perMinute, perDay: ctx.caller.limits.perDay },
      usage: { minute: shown(minute!), day: shown(day!) },
    };
  });
