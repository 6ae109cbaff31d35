// The tRPC HTTP mounts for internal TypeScript apps (issue 7):
//   /trpc        the app router (the same procedures as /public/v1), behind the same guard: API key,
//                plan gate, quotas and X-RateLimit-* headers, then the procedures' own scope check,
//                validation and logic. Errors carry the public envelope in `error.data.envelope` and
//                the same HTTP status (routers/trpc.ts trpcErrorShape). No batching: one call is one
//                request against the key's quota; bodies are JSON.
//   /trpc-admin  the platform-admin router (routers/admin/), NOT part of the app router, behind the
//                internal service token (`Authorization: Bearer <INTERNAL_TOKEN>`); 404 for
//                everything when INTERNAL_TOKEN is unset.
import type { TRPCError } from "@trpc/server";
import { createExpressMiddleware } from "@trpc/server/adapters/express";
import { TRPC_ERROR_CODES_BY_KEY, type TRPC_ERROR_CODE_KEY } from "@trpc/server/rpc";
import express, { type Request, type RequestHandler, type Response } from "express";
import { adminRouter } from "../routers/admin/_router.js";
import { createAdminContext, internalTokenMatches } from "../routers/admin/trpc.js";
import type { AppRouter } from "../routers/index.js";
import { createContext, trpcErrorShape } from "../routers/trpc.js";
import { guard } from "../server/auth/guard.js";
import { AppError, ERROR_STATUS, toAppError, type ErrorCode } from "../server/errors.js";
import type { Services } from "../server/services.js";

export const TRPC_PREFIX = "/trpc";
export const ADMIN_TRPC_PREFIX = "/trpc-admin";

const JSON_TYPE = /^application\/json\s*(?:;.*)?$/i;

const under = (path: string, prefix: string) => path === prefix || path.startsWith(`${prefix}/`);

/**
 * A tRPC error response written outside tRPC (the guard's and the admin gate's answers), so that
 * @trpc/client parses it like any other: `{error: shape}`, or one entry per call of a batch.
 */
function sendTrpcError(req: Request, res: Response, status: number, shape: object): void {
  if (res.headersSent) return;
  const calls = req.path.slice(req.path.lastIndexOf("/") + 1).split(",").length;
  const batch = req.query.batch === "1" || req.query.batch === "true";
  const body = batch ? Array.from({ length: calls }, () => ({ error: shape })) : { error: shape };
  res.status(status).type("application/json").send(JSON.stringify(body));
}

/**
 * Runs the shared guard, rewriting its rejections (401/403/429 envelopes) into tRPC error responses
 * with the envelope in `data.envelope`; headers it sets (X-RateLimit-*, Retry-After) are kept.
 */
function trpcGuard(services: Services): RequestHandler {
  const g = guard(services);
  return (req, res, next) => {
    const send = res.send;
    res.send = function (this: Response, body?: any) {
      res.send = send;
      if (res.statusCode >= 400 && typeof body === "string") {
        try {
          const env = JSON.parse(body);
          if (env && typeof env.error === "string" && env.error in ERROR_STATUS) {
            const app = new AppError(env.error as ErrorCode, String(env.message ?? ""), env.details ?? {});
            sendTrpcError(req, res, res.statusCode, trpcErrorShape(app, req.id));
            return res;
          }
        } catch {
          /* not JSON: leave it */
        }
      }
      return send.call(this, body);
    } as Response["send"];
    g(req, res, (err?: unknown) => {
      res.send = send;
      next(err);
    });
  };
}

/**
 * The transport rules of /trpc, checked after the guard so that 401/403/429 come first:
 * - one call per request (batching would count N calls as one request against the quota) → 422;
 * - a POST body must be JSON: otherwise it is recorded as the request's body problem, exactly as the
 *   facade's body reader does, and reported as 422 by scoped() after the scope check.
 * (tRPC itself would refuse both before building the context, i.e. without the request id.)
 */
function transportRules(): RequestHandler {
  return (req, res, next) => {
    if (req.query.batch !== undefined)
      return sendTrpcError(req, res, 422, trpcErrorShape(new AppError("VALIDATION_ERROR", "Batching is not supported on /trpc: send one call per request"), req.id));
    if (req.method === "POST") {
      if (!JSON_TYPE.test(req.headers["content-type"] ?? "")) {
        req.bodyProblem = new AppError("VALIDATION_ERROR", "Content-Type must be application/json", {
          fields: [{ field: "Content-Type", code: "invalid_header", message: "must be application/json" }],
        });
        req.body = {};
      }
      req.headers["content-type"] = "application/json";
    }
    next();
  };
}

function adminErrorShape(key: TRPC_ERROR_CODE_KEY, status: number, message: string) {
  return { message, code: TRPC_ERROR_CODES_BY_KEY[key], data: { code: key, httpStatus: status } };
}

export function internalTrpc(services: Services, router: AppRouter): express.Router {
  const api = express.Router();
  // Server-side failures only (an AppError, a protocol refusal or bad input is the client's).
  const logFailure = ({ error, req }: { error: TRPCError; req: Request }) => {
    if (error.code === "INTERNAL_SERVER_ERROR" && toAppError(error).status >= 500)
      services.logger.error({ reqId: req.id, err: error.cause ?? error }, "request failed");
  };

  // The guard sees the full path (this router is mounted at the root), so nothing under /trpc is
  // exempt from it — not even /trpc/openapi.json.
  const g = trpcGuard(services);
  api.use((req, res, next) => (under(req.path, TRPC_PREFIX) ? g(req, res, next) : next()));
  api.use(
    TRPC_PREFIX,
    transportRules(),
    createExpressMiddleware({
      router,
      createContext: ({ req, res }) => createContext(services, req, res),
      allowBatching: false,
      maxBodySize: services.config.bodyLimitBytes,
      onError: logFailure,
    }),
  );

  return api;
}

export function adminTrpc(services: Services): express.Router {
  const api = express.Router();
  api.use(ADMIN_TRPC_PREFIX, (req, res, next) => {
    const token = services.config.internalToken;
    if (!token) return sendTrpcError(req, res, 404, adminErrorShape("NOT_FOUND", 404, "Not found"));
    if (!internalTokenMatches(token, req.header("authorization"))) {
      res.setHeader("WWW-Authenticate", 'Bearer realm="internal"');
      return sendTrpcError(req, res, 401, adminErrorShape("UNAUTHORIZED", 401, "Missing or invalid internal token"));
    }
    next();
  });
  api.use(
    ADMIN_TRPC_PREFIX,
    createExpressMiddleware({
      router: adminRouter,
      createContext: ({ req, res }) => createAdminContext(services, req, res),
      maxBodySize: services.config.bodyLimitBytes,
      onError: ({ error, req }) => {
        if (error.code === "INTERNAL_SERVER_ERROR") services.logger.error({ reqId: req.id, err: error.cause ?? error }, "admin request failed");
      },
    }),
  );
  return api;
}
