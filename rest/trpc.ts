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
import {
  jsonBodyReader,
  jsonShapeProblem,
  mayHoldTextProblem,
  queryTextProblems,
  rawQueryOf,
  recordInputProblem,
  shapeProblem,
  textProblemError,
  textProblems,
} from "../server/body.js";
import { AppError, logFailure } from "../server/errors.js";
import type { Services } from "../server/services.js";

export const TRPC_PREFIX = "/trpc";
export const ADMIN_TRPC_PREFIX = "/trpc-admin";

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
 * The shared guard, writing its rejections (401/403/429) as tRPC error responses with the envelope
 * in `data.envelope`; headers it sets (X-RateLimit-*, Retry-After) are kept. (Mounted in Express:
 * the request and response are Express's.)
 */
function trpcGuard(services: Services): RequestHandler {
  return guard(services, (req, res, err) => sendTrpcError(req as Request, res as Response, err.status, trpcErrorShape(err, req.id))) as RequestHandler;
}

/**
 * The transport rules of /trpc, checked after the guard so that 401/403/429 come first:
 * - one call per request (batching would count N calls as one request against the quota) → 422;
 * - a POST body is read by the facade's body reader (server/body.ts: JSON media types, size, nesting
 *   depth, member count, NUL): a body it cannot use is recorded as the request's body problem and
 *   reported as 422 by scoped() after the scope check; too large → 413 at once;
 * - a query's `input` parameter (JSON in the URL) has the same depth and member limits (else 422);
 * - text stored as sent (server/body.ts): percent-encoded bytes of the query string that are not
 *   UTF-8, and U+0000 or a lone surrogate in a string of the query's `input`, are a problem of the
 *   request's input like a body's, reported as 422 after the scope check.
 * (tRPC itself would refuse these before building the context, i.e. without the request id.)
 */
function transportRules(limitBytes: number): RequestHandler {
  const readBody = jsonBodyReader(limitBytes, (req, res, err) => sendTrpcError(req as Request, res as Response, err.status, trpcErrorShape(err, req.id)));
  return (req, res, next) => {
    if (req.query.batch !== undefined)
      return sendTrpcError(req, res, 422, trpcErrorShape(new AppError("VALIDATION_ERROR", "Batching is not supported on /trpc: send one call per request"), req.id));
    const unstorable = queryTextProblems(rawQueryOf(req.originalUrl));
    for (const input of [req.query.input].flat()) {
      const shape = typeof input === "string" ? jsonShapeProblem(input) : null;
      if (shape) return sendTrpcError(req, res, 422, trpcErrorShape(shapeProblem(shape, "input", "input"), req.id));
      if (typeof input === "string" && mayHoldTextProblem(input)) {
        let parsed: unknown;
        try {
          parsed = JSON.parse(input);
        } catch {
          continue; // malformed JSON: tRPC's own 422
        }
        unstorable.push(...textProblems(parsed, [], "input"));
      }
    }
    if (unstorable.length) recordInputProblem(req, textProblemError(unstorable));
    readBody(req, res, next);
  };
}

function adminErrorShape(key: TRPC_ERROR_CODE_KEY, status: number, message: string) {
  return { message, code: TRPC_ERROR_CODES_BY_KEY[key], data: { code: key, httpStatus: status } };
}

export function internalTrpc(services: Services, router: AppRouter): express.Router {
  const api = express.Router();
  // The guard is mounted on the same prefix, with the same (Express, case-insensitive) path matching,
  // as the handler: whatever spelling of /trpc reaches tRPC (/TRPC/…, /Trpc/…, /trpc//…) passed the
  // guard first. Nothing under /trpc is exempt — not even /trpc/openapi.json.
  api.use(
    TRPC_PREFIX,
    trpcGuard(services),
    transportRules(services.config.bodyLimitBytes),
    createExpressMiddleware({
      router,
      createContext: ({ req, res }) => createContext(services, req, res),
      allowBatching: false,
      maxBodySize: services.config.bodyLimitBytes,
      onError: ({ error, req, path }: { error: TRPCError; req: Request; path?: string }) => logFailure(services.logger, req.id, error, undefined, path),
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
