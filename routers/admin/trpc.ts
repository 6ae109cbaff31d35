// The platform-admin tRPC instance: its own context (no API key, no tenant) and its own error shape
// (tRPC's default). Served only at /trpc-admin (rest/trpc.ts), never through /public/v1 or /trpc.
// Authentication is the internal service token (config.internalToken, env INTERNAL_TOKEN) — or, on
// the embedded database, the token this run wrote for the admin CLI (server/admin/live.ts) — as
// `Authorization: Bearer <token>`: checked by the mount before tRPC runs and again here, so the
// router is safe wherever it is mounted. AdminError / FixtureError (a refused operation, nothing
// changed) → BAD_REQUEST with the operation's message.
import { createHash, timingSafeEqual } from "node:crypto";
import { initTRPC, TRPCError } from "@trpc/server";
import { ZodError } from "zod";
import { AdminError } from "../../server/admin/operations.js";
import { FixtureError } from "../../server/admin/fixture.js";
import type { Services } from "../../server/services.js";

export interface AdminContext {
  services: Services;
  requestId: string;
  /** The call's Authorization header as sent (a transport's fact: the mount checks it too). */
  authorization?: string;
}

const digest = (s: string) => createHash("sha256").update(s, "utf8").digest();

/**
 * Whether an Authorization header carries the internal token. Both sides are hashed to a fixed
 * length first, so the comparison is constant-time and does not reveal the token's length.
 * Always false when no token is configured (the admin API is disabled).
 */
export function internalTokenMatches(expected: string | undefined, authorization: string | undefined): boolean {
  if (!expected) return false;
  const m = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(authorization ?? "");
  const presented = m?.[1] ?? "";
  const same = timingSafeEqual(digest(presented), digest(expected));
  return same && presented.length > 0;
}

/** Whether an Authorization header carries INTERNAL_TOKEN or this run's local admin token (server/admin/live.ts). */
export function adminAuthorized(
  services: Pick<Services, "config" | "localAdminToken">,
  authorization: string | undefined,
): boolean {
  return (
    internalTokenMatches(services.config.internalToken, authorization) ||
    internalTokenMatches(services.localAdminToken, authorization)
  );
}

/** A readable one-line message: zod issues as `field: problem; …`, internals never leaked. */
function adminMessage(error: TRPCError): string {
  if (error.code === "INTERNAL_SERVER_ERROR") return "Internal server error";
  const cause = error.cause;
  if (cause instanceof ZodError)
    return cause.issues.map((i) => `${i.path.length ? i.path.join(".") : "(input)"}: ${i.message}`).join("; ");
  if (cause instanceof SyntaxError) return "Malformed JSON input";
  return error.message;
}

// tRPC's default shape ({message, code, data: {code, httpStatus, path}}) without the stack.
const t = initTRPC.context<AdminContext>().create({
  errorFormatter({ shape, error }) {
    return {
      ...shape,
      message: adminMessage(error),
      data: { code: shape.data.code, httpStatus: shape.data.httpStatus, path: shape.data.path },
    };
  },
});

export const adminRouterBuilder = t.router;

export const adminProcedure = t.procedure.use(async ({ ctx, next }) => {
  if (!adminAuthorized(ctx.services, ctx.authorization))
    throw new TRPCError({ code: "UNAUTHORIZED", message: "Missing or invalid internal token" });
  const result = await next();
  if (!result.ok) {
    const cause = result.error.cause;
    if (cause instanceof AdminError || cause instanceof FixtureError)
      throw new TRPCError({ code: "BAD_REQUEST", message: cause.message, cause });
  }
  return result;
});
