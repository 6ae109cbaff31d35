// The tRPC HTTP mounts for internal TypeScript apps (batching and calls without input):
//   /trpc        the app router (the same procedures as /public/v1), behind the same guard: API key,
//                plan gate, quotas and X-RateLimit-* headers, then the procedures' own scope check,
//                validation and logic. Errors carry the public envelope in `error.data.envelope` and
//                the same HTTP status (routers/trpc.ts trpcErrorShape). Batches (httpBatchLink,
//                `?batch=1`) of at most MAX_BATCH_CALLS calls: every call is counted against the
//                key's quotas like a request of its own (batchRules below). Bodies are JSON.
//   /trpc-admin  the platform-admin router (routers/admin/), NOT part of the app router, behind the
//                internal service token (`Authorization: Bearer <INTERNAL_TOKEN>`) or, on the
//                embedded database, this run's local token (server/admin/live.ts); 404 for
//                everything when neither is set.
import type { IncomingMessage, ServerResponse } from "node:http";
import type { TRPCError } from "@trpc/server";
import { createExpressMiddleware } from "@trpc/server/adapters/express";
import { TRPC_ERROR_CODES_BY_KEY, type TRPC_ERROR_CODE_KEY } from "@trpc/server/rpc";
import express, { type Request, type RequestHandler, type Response } from "express";
import type { Caller } from "../server/auth/authenticate.js";
import { adminRouter } from "../routers/admin/_router.js";
import { adminAuthorized } from "../routers/admin/trpc.js";
import type { AppRouter } from "../routers/index.js";
import { createContext, trpcErrorShape } from "../routers/trpc.js";
import { admittedCaller, guard, setQuotaHeaders } from "../server/auth/guard.js";
import {
  jsonBodyReader,
  jsonShapeProblem,
  MAX_BATCH_JSON_MEMBERS,
  MAX_JSON_MEMBERS,
  mayHoldTextProblem,
  queryTextProblems,
  rawQueryOf,
  recordInputProblem,
  shapeProblem,
  textProblemError,
  textProblems,
} from "../server/body.js";
import { AppError, logFailure, toAppError } from "../server/errors.js";
import type { QuotaState } from "../server/limits/quotas.js";
import type { Services } from "../server/services.js";
import { exchangeOf, requestIdOf } from "../server/exchange.js";
import { factsOf } from "./facts.js";
import { batchShare } from "../routers/_lib/page-budget.js";

export const TRPC_PREFIX = "/trpc";
export const ADMIN_TRPC_PREFIX = "/trpc-admin";
/**
 * Most calls in one /trpc batch (set httpBatchLink's `maxItems` to it). A larger batch is refused
 * whole with one 422 VALIDATION_ERROR before any of its calls runs (counted once, as a refused request).
 */
export const MAX_BATCH_CALLS = 20;

/**
 * The number of calls of a batch request, read exactly as tRPC reads it (resolveResponse: `batch=1`
 * in the URL's search parameters; the last path segment, percent-decoded, split at ","), so that the
 * count the quota charges is the count tRPC runs. undefined: not a batch (or a path tRPC refuses whole).
 */
function batchCalls(req: Request): number | undefined {
  if (!req.url.includes("?")) return undefined;
  let batch: string | null;
  try {
    batch = new URL(req.url, "http://localhost").searchParams.get("batch");
  } catch {
    return undefined;
  }
  if (batch !== "1") return undefined;
  try {
    return decodeURIComponent(req.path.slice(req.path.lastIndexOf("/") + 1)).split(",").length;
  } catch {
    return undefined; // tRPC answers "Invalid URL-encoding in path" for the whole request, running nothing
  }
}

/**
 * A tRPC error response written outside tRPC (the guard's, the transport rules' and the admin gate's
 * answers), for the whole request: `{error: shape}`, which @trpc/client also reads as the answer of
 * every call of a batch (httpBatchLink applies a non-array body to each call), so its size does not
 * grow with the number of calls a refused request names.
 */
function sendTrpcError(
  res: Response,
  status: number,
  shape: { data: { code: string; envelope?: { error: string } } },
): void {
  if (res.headersSent) return;
  exchangeOf(res.req).errorCode ??= shape.data.envelope?.error ?? shape.data.code;
  res
    .status(status)
    .type("application/json")
    .send(JSON.stringify({ error: shape }));
}

/**
 * The shared guard, writing its rejections (401/403/429) as tRPC error responses with the envelope
 * in `data.envelope`; headers it sets (X-RateLimit-*, Retry-After) are kept. (Mounted in Express:
 * the request and response are Express's.)
 */
function trpcGuard(services: Services): RequestHandler {
  return guard(services, (req, res, err) =>
    sendTrpcError(res as Response, err.status, trpcErrorShape(err, requestIdOf(req))),
  ) as RequestHandler;
}

/**
 * The batch rules of /trpc, after the guard (which authenticated the key and counted the first call):
 * - at most MAX_BATCH_CALLS calls, else one 422 for the request before anything runs;
 * - an Idempotency-Key belongs to one call: with it, a batch of more than one call → 422 (one header
 *   for several writes would make them replays or mismatches of each other);
 * - the batch's response has one page budget: each call's list page gets an equal share of it
 *   (req.pageBudget, routers/_lib/page-budget.ts batchShare), so N list calls answer no more than one,
 *   and at most one call of the batch answers an item larger than its share (req.oversized);
 * - every further call is counted like a request of its own (Quotas.admit(), with the caller the
 *   guard authenticated: same windows, same ceilings, same rules), in call order. A call the quota
 *   refuses answers its own 429 inside the batch (req.callRefusals, thrown by the procedure builders
 *   before the scope check, routers/trpc.ts) while the others run; the X-RateLimit-* headers are the
 *   state after the last call. A batch of N calls costs N in the minute and day windows.
 * A batch the guard refused (401, plan 403, or 429 at its first call) is refused whole, counted once:
 * every later call would be refused for the same reason.
 */
function batchRules(services: Services): RequestHandler {
  const admissionOf = (caller: Caller) => admittedCaller(services, caller);
  return async (req, res, next) => {
    const calls = batchCalls(req);
    if (calls === undefined || calls === 1) return next();
    const x = exchangeOf(req);
    const refuse = (err: AppError) => sendTrpcError(res, err.status, trpcErrorShape(err, x.id));
    if (calls > MAX_BATCH_CALLS)
      return refuse(
        new AppError(
          "VALIDATION_ERROR",
          `A batch holds at most ${MAX_BATCH_CALLS} calls; this one has ${calls}: split it (httpBatchLink's maxItems)`,
          {
            fields: [
              {
                field: "(batch)",
                code: "too_many_calls",
                message: `at most ${MAX_BATCH_CALLS} calls per batch, got ${calls}`,
              },
            ],
            maxCalls: MAX_BATCH_CALLS,
          },
        ),
      );
    const batch = {
      pageBudget: batchShare(calls),
      oversized: { taken: false },
      refusals: [] as (AppError | undefined)[],
    };
    x.batch = batch;
    if (req.headers["idempotency-key"] !== undefined)
      return refuse(
        new AppError(
          "VALIDATION_ERROR",
          "Idempotency-Key applies to one call: send the call alone (httpLink) or as a batch of one",
          {
            fields: [{ field: "Idempotency-Key", code: "batched", message: "not allowed on a batch of several calls" }],
          },
        ),
      );
    try {
      const how = admissionOf(x.caller!);
      const refusals = batch.refusals;
      let last: QuotaState | undefined;
      for (let i = 1; i < calls; i++) {
        const decision = await services.quotas.admit(undefined, undefined, how);
        last = decision.quota;
        if (!decision.admitted) {
          refusals[i] = toAppError(decision.refusal);
          if (decision.quota.window) services.metrics.rateLimited.inc({ window: decision.quota.window });
        }
      }
      if (last) setQuotaHeaders(res, last);
    } catch (err) {
      const app = toAppError(err);
      logFailure(services.logger, x.id, err, app);
      return refuse(app);
    }
    next();
  };
}

/**
 * The transport rules of /trpc, checked after the guard so that 401/403/429 come first:
 * - a POST without a body (Content-Length: 0) is a call without input, like a GET without `input`
 *   (the procedure builders pass `{}`, routers/trpc.ts); tRPC reads the empty body itself;
 * - a POST body is read by the facade's body reader (server/body.ts: JSON media types, size, nesting
 *   depth, member count, NUL): a body it cannot use is recorded as the request's body problem and
 *   reported as 422 by scoped() after the scope check; too large → 413 at once. A request that
 *   names a batch upsert (`batchUpserts`) has the batch routes' member cap, MAX_BATCH_JSON_MEMBERS;
 * - a query's `input` parameter (JSON in the URL) has the same depth and member limits (else 422),
 *   read as tRPC reads it (URLSearchParams over the raw query string, whatever parameters come
 *   before it: Express's own parser stops at 1,000); more than one `input` is 422;
 * - text stored as sent (server/body.ts): percent-encoded bytes of the query string that are not
 *   UTF-8, and U+0000 or a lone surrogate in a string of the query's `input`, are a problem of the
 *   request's input like a body's, reported as 422 after the scope check.
 * (tRPC itself would refuse these before building the context, i.e. without the request id.)
 */
function transportRules(limitBytes: number, batchUpserts: Set<string>): RequestHandler {
  // The calls a request names, as tRPC reads them (the path's last segment, percent-decoded, split at
  // "," for a batch): one of them a batch upsert → the larger member cap.
  const membersOf = (req: IncomingMessage) => {
    let names: string[];
    try {
      names = decodeURIComponent((req as Request).path.slice(1)).split(",");
    } catch {
      return MAX_JSON_MEMBERS; // tRPC refuses the path whole
    }
    return names.some((n) => batchUpserts.has(n)) ? MAX_BATCH_JSON_MEMBERS : MAX_JSON_MEMBERS;
  };
  const tooLarge = (req: IncomingMessage, res: ServerResponse, err: AppError) =>
    sendTrpcError(res as Response, err.status, trpcErrorShape(err, requestIdOf(req)));
  const readBody = jsonBodyReader(limitBytes, tooLarge, membersOf);
  return (req, res, next) => {
    const rawQuery = rawQueryOf(req.originalUrl);
    const unstorable = queryTextProblems(rawQuery);
    const inputs = new URLSearchParams(rawQuery).getAll("input");
    if (inputs.length > 1) {
      const err = new AppError("VALIDATION_ERROR", "the query has more than one input parameter", {
        fields: [{ field: "input", code: "duplicate", message: "give input once: tRPC reads the first one only" }],
      });
      return sendTrpcError(res, 422, trpcErrorShape(err, requestIdOf(req)));
    }
    for (const input of inputs) {
      const shape = typeof input === "string" ? jsonShapeProblem(input) : null;
      if (shape)
        return sendTrpcError(res, 422, trpcErrorShape(shapeProblem(shape, "input", "input"), requestIdOf(req)));
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
    if (
      req.method === "POST" &&
      req.headers["content-length"] === "0" &&
      req.headers["transfer-encoding"] === undefined
    ) {
      req.headers["content-type"] = "application/json"; // nothing to parse, whatever it said
      return next();
    }
    readBody(req, res, next);
  };
}

function adminErrorShape(key: TRPC_ERROR_CODE_KEY, status: number, message: string) {
  return { message, code: TRPC_ERROR_CODES_BY_KEY[key], data: { code: key, httpStatus: status } };
}

export function internalTrpc(services: Services, router: AppRouter): express.Router {
  const api = express.Router();
  const batchUpserts = new Set(Object.keys(router._def.procedures).filter((n) => n.endsWith(".batchUpsert")));
  // The guard is mounted on the same prefix, with the same (Express, case-insensitive) path matching,
  // as the handler: whatever spelling of /trpc reaches tRPC (/TRPC/…, /Trpc/…, /trpc//…) passed the
  // guard first. Nothing under /trpc is exempt — not even /trpc/openapi.json.
  api.use(
    TRPC_PREFIX,
    trpcGuard(services),
    batchRules(services),
    transportRules(services.config.bodyLimitBytes, batchUpserts),
    createExpressMiddleware({
      router,
      createContext: ({ req }) => {
        const x = exchangeOf(req);
        return createContext(services, {
          requestId: x.id,
          caller: x.caller,
          request: factsOf(req, "trpc"),
          batch: x.batch,
        });
      },
      // A replayed call says so (an Idempotency-Key belongs to a call alone: batchRules).
      responseMeta: ({ ctx }) => (ctx?.outcomes[0]?.replayed ? { headers: { "Idempotent-Replayed": "true" } } : {}),
      allowBatching: true,
      maxBatchSize: MAX_BATCH_CALLS,
      maxBodySize: services.config.bodyLimitBytes,
      onError: ({ error, req, path }: { error: TRPCError; req: Request; path?: string }) => {
        const x = exchangeOf(req);
        const app = toAppError(error);
        x.errorCode ??= app.code;
        logFailure(services.logger, x.id, error, app, path);
      },
    }),
  );

  return api;
}

export function adminTrpc(services: Services): express.Router {
  const api = express.Router();
  api.use(ADMIN_TRPC_PREFIX, (req, res, next) => {
    if (!services.config.internalToken && !services.localAdminToken)
      return sendTrpcError(res, 404, adminErrorShape("NOT_FOUND", 404, "Not found"));
    if (!adminAuthorized(services, req.header("authorization"))) {
      res.setHeader("WWW-Authenticate", 'Bearer realm="internal"');
      return sendTrpcError(res, 401, adminErrorShape("UNAUTHORIZED", 401, "Missing or invalid internal token"));
    }
    next();
  });
  api.use(
    ADMIN_TRPC_PREFIX,
    createExpressMiddleware({
      router: adminRouter,
      createContext: ({ req }) => ({
        services,
        requestId: requestIdOf(req),
        authorization: req.header("authorization"),
      }),
      maxBodySize: services.config.bodyLimitBytes,
      onError: ({ error, req }) => {
        if (error.code === "INTERNAL_SERVER_ERROR")
          services.logger.error({ reqId: requestIdOf(req), err: error.cause ?? error }, "admin request failed");
      },
    }),
  );
  return api;
}
