// initTRPC, the context, and the procedure builders every operation starts from:
//   authed            valid key of an eligible tenant (checked by server/auth before the procedure)
//   scoped(scope)     + the exact scope of the endpoint (403 PERMISSION_DENIED) and a usable body
//   scopedAny(scopes) + at least one of several scopes (an operation over several resources, e.g.
//                     GET /changes, which then narrows to what the key can read), and a usable body
// Check order over the whole request: 401 → plan 403 → 429 → scope 403 → 422 → 404 → 409.
import { initTRPC } from "@trpc/server";
import { TRPC_ERROR_CODES_BY_KEY, type TRPC_ERROR_CODE_KEY } from "@trpc/server/rpc";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { OpenApiMeta } from "trpc-to-openapi";
import type { Caller } from "../server/auth/authenticate.js";
import type { Scope } from "../server/auth/scopes.js";
import type { Db } from "../server/db/client.js";
import { AppError, envelope, toAppError, type ErrorCode } from "../server/errors.js";
import "../server/http-types.js";
import type { Services } from "../server/services.js";

export interface Context {
  services: Services;
  req: IncomingMessage;
  res: ServerResponse;
  requestId: string;
  caller?: Caller;
  /** Where queries run: the root client, or the transaction of an idempotent create. */
  db: Db;
}

export function createContext(services: Services, req: IncomingMessage, res: ServerResponse): Context {
  return { services, req, res, requestId: req.id, caller: req.caller, db: services.db.prisma };
}

export type Meta = OpenApiMeta<{
  /** HTTP status of a success (default 200). */
  successStatus?: number;
  /** The exact scope the operation needs (null: none, e.g. /me). Set by scoped(). */
  scope?: Scope | null;
  /** Set by scopedAny(): the operation needs at least one of these scopes (and narrows itself). */
  anyScope?: Scope[];
  idempotent?: boolean;
  /** Operation-specific error codes (404/409 …) for the OpenAPI document; the common ones are added there. */
  errors?: ErrorCode[];
}>;

/** tRPC's code for each status an AppError can have (data.code / the JSON-RPC code of a tRPC error). */
const TRPC_KEY_BY_STATUS: Record<number, TRPC_ERROR_CODE_KEY> = {
  400: "BAD_REQUEST",
  401: "UNAUTHORIZED",
  403: "FORBIDDEN",
  404: "NOT_FOUND",
  409: "CONFLICT",
  413: "PAYLOAD_TOO_LARGE",
  422: "UNPROCESSABLE_CONTENT",
  429: "TOO_MANY_REQUESTS",
  503: "SERVICE_UNAVAILABLE",
};

/**
 * The one error shape, for both transports. `envelope`/`status` at the top are what the REST facade
 * keeps (rest/facade.ts); `message`/`code`/`data` are tRPC's own shape, which @trpc/client parses —
 * `data.httpStatus` is the HTTP status tRPC answers with and `data.envelope` the same public envelope.
 * Also used by rest/trpc.ts for the guard's 401/403/429 on /trpc.
 */
export function trpcErrorShape(app: AppError, requestId: string, path?: string) {
  const key = TRPC_KEY_BY_STATUS[app.status] ?? "INTERNAL_SERVER_ERROR";
  const env = envelope(app, requestId);
  return {
    message: app.message,
    code: TRPC_ERROR_CODES_BY_KEY[key],
    data: { code: key, httpStatus: app.status, path, envelope: env },
    envelope: env,
    status: app.status,
  };
}

const t = initTRPC
  .context<Context>()
  .meta<Meta>()
  .create({
    errorFormatter({ error, ctx, path }) {
      return trpcErrorShape(toAppError(error), ctx?.requestId ?? "", path);
    },
  });

export const router = t.router;
export const middleware = t.middleware;
export const createCallerFactory = t.createCallerFactory;

/** The caller the guard authenticated (server/auth), or 401: every operation but the public document needs one. */
function callerOf(ctx: Context): Caller {
  if (!ctx.caller) throw new AppError("INVALID_CREDENTIALS", "Missing X-API-Key header");
  return ctx.caller;
}

// Each builder is ONE middleware (authentication, scope and body problem together): tRPC copies the
// call's options at every middleware level, so one level per procedure is the cheap shape. Only the
// keys a middleware adds are passed to next(); tRPC merges them into the context.
export const authed = t.procedure.use(({ ctx, next }) => {
  const caller = callerOf(ctx);
  return next({ ctx: { caller, tenantId: caller.tenantId } });
});

export function scoped(scope: Scope) {
  return t.procedure.meta({ scope }).use(async ({ ctx, next }) => {
    const caller = callerOf(ctx);
    if (!caller.scopes.includes(scope))
      throw new AppError("PERMISSION_DENIED", `This key lacks the scope ${scope}`, { requiredScope: scope });
    if (ctx.req.bodyProblem) throw ctx.req.bodyProblem;
    const result = await next({ ctx: { caller, tenantId: caller.tenantId } });
    // An input the zod schema refused becomes its bounded envelope here, once (server/errors.ts
    // zodDetails caps the field list): otherwise the REST adapter would also serialize zod's raw
    // issues (one per unknown key) into a response body that is then thrown away.
    if (!result.ok && result.error.code === "BAD_REQUEST" && (result.error.cause as any)?.name === "ZodError") throw toAppError(result.error);
    return result;
  });
}

/** Like scoped(), for an operation that needs any one of `scopes` (403 PERMISSION_DENIED when the key has none). */
export function scopedAny(scopes: readonly Scope[]) {
  return t.procedure.meta({ anyScope: [...scopes] }).use(({ ctx, next }) => {
    const caller = callerOf(ctx);
    if (!scopes.some((s) => caller.scopes.includes(s)))
      throw new AppError("PERMISSION_DENIED", `This key has none of the scopes ${scopes.join(", ")}`, { requiredScopes: [...scopes] });
    if (ctx.req.bodyProblem) throw ctx.req.bodyProblem;
    return next({ ctx: { caller, tenantId: caller.tenantId } });
  });
}

export type AuthedContext = Context & { caller: Caller; tenantId: string };
