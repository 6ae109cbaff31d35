// initTRPC, the context, and the procedure builders every operation starts from:
//   authed            valid key of an eligible tenant (checked by server/auth before the procedure)
//   scoped(scope)     + the exact scope of the endpoint (403 PERMISSION_DENIED) and a usable body
// Check order over the whole request: 401 → plan 403 → 429 → scope 403 → 422 → 404 → 409.
import { initTRPC } from "@trpc/server";
import type { Request, Response } from "express";
import type { OpenApiMeta } from "trpc-to-openapi";
import type { Caller } from "../server/auth/authenticate.js";
import type { Scope } from "../server/auth/scopes.js";
import type { Db } from "../server/db/client.js";
import { AppError, envelope, toAppError, type ErrorCode } from "../server/errors.js";
import "../server/http-types.js";
import type { Services } from "../server/services.js";

export interface Context {
  services: Services;
  req: Request;
  res: Response;
  requestId: string;
  caller?: Caller;
  /** Where queries run: the root client, or the transaction of an idempotent create. */
  db: Db;
}

export function createContext(services: Services, req: Request, res: Response): Context {
  return { services, req, res, requestId: req.id, caller: req.caller, db: services.db.prisma };
}

export type Meta = OpenApiMeta<{
  /** HTTP status of a success (default 200). */
  successStatus?: number;
  /** The exact scope the operation needs (null: none, e.g. /me). Set by scoped(). */
  scope?: Scope | null;
  idempotent?: boolean;
  /** Operation-specific error codes (404/409 …) for the OpenAPI document; the common ones are added there. */
  errors?: ErrorCode[];
}>;

const t = initTRPC
  .context<Context>()
  .meta<Meta>()
  .create({
    // The error shape is the public envelope; rest/facade.ts strips what trpc-to-openapi adds.
    errorFormatter({ error, ctx }) {
      const app = toAppError(error);
      return { envelope: envelope(app, ctx?.requestId ?? ""), status: app.status } as any;
    },
  });

export const router = t.router;
export const middleware = t.middleware;
export const createCallerFactory = t.createCallerFactory;

export const authed = t.procedure.use(({ ctx, next }) => {
  if (!ctx.caller) throw new AppError("INVALID_CREDENTIALS", "Missing X-API-Key header");
  return next({ ctx: { ...ctx, caller: ctx.caller, tenantId: ctx.caller.tenantId } });
});

export function scoped(scope: Scope) {
  return authed.meta({ scope }).use(({ ctx, next }) => {
    if (!ctx.caller.scopes.includes(scope))
      throw new AppError("PERMISSION_DENIED", `This key lacks the scope ${scope}`, { requiredScope: scope });
    if (ctx.req.bodyProblem) throw ctx.req.bodyProblem;
    return next();
  });
}

export type AuthedContext = Context & { caller: Caller; tenantId: string };
