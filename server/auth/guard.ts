// The first step of every /public/v1 (and /trpc) request: authenticate the key, apply the plan
// gate, count the request against the key's quotas and set the X-RateLimit-* headers — on every
// response, including 401 and 403, where they describe the presented key's hash at the default
// ceiling (ANONYMOUS_RATE_LIMIT_PER_MINUTE) without counting it. It has no exemptions: it is mounted
// with Express's own path matching on each prefix it guards (so every spelling that reaches a
// handler passes it), and what is public (GET/HEAD /public/v1/openapi.json) is routed before it.
import type { Request, RequestHandler, Response } from "express";
import { AppError, envelope, logFailure, toAppError } from "../errors.js";
import type { QuotaState } from "../limits/quotas.js";
import type { Services } from "../services.js";
import { authenticate } from "./authenticate.js";
import { hashKey } from "./keys.js";

export function setQuotaHeaders(res: Response, q: QuotaState): void {
  res.setHeader("X-RateLimit-Limit", String(q.limit));
  res.setHeader("X-RateLimit-Remaining", String(q.remaining));
  res.setHeader("X-RateLimit-Reset", String(q.reset));
  if (q.retryAfter !== undefined) res.setHeader("Retry-After", String(q.retryAfter));
}

function reject(req: Request, res: Response, err: AppError) {
  res.status(err.status).type("application/json").send(JSON.stringify(envelope(err, req.id)));
}

export function guard(services: Services): RequestHandler {
  return async (req, res, next) => {
    const presented = req.header("x-api-key");
    try {
      const caller = await authenticate(services.db, presented, services.now());
      const q = await services.quotas.consume(caller.keyHash, caller.limits, services.now().getTime());
      setQuotaHeaders(res, q);
      req.quota = q;
      if (q.retryAfter !== undefined) {
        services.metrics.rateLimited.inc({ window: q.window ?? "minute" });
        return reject(req, res, new AppError("RATE_LIMIT_EXCEEDED", "Rate limit exceeded for this API key", { retryAfter: q.retryAfter }));
      }
      req.caller = caller;
      next();
    } catch (err) {
      const app = toAppError(err);
      logFailure(services.logger, req.id, err, app);
      if (!res.hasHeader("X-RateLimit-Limit"))
        setQuotaHeaders(res, await services.quotas.peek(hashKey(presented ?? ""), services.config.anonymousPerMinute, services.now().getTime()));
      reject(req, res, app);
    }
  };
}
