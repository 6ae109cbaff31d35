// The first step of every /public/v1 (and /trpc) request: authenticate the key, apply the plan
// gate, count the request against the key's quotas and set the X-RateLimit-* headers — on every
// response, including 401 and 403, where they describe the presented key's hash at the default
// ceiling (ANONYMOUS_RATE_LIMIT_PER_MINUTE) without counting it. It has no exemptions: it is mounted
// with Express's own path matching on each prefix it guards (so every spelling that reaches a
// handler passes it), and what is public (GET/HEAD /public/v1/openapi.json) is routed before it.
// Written on node's request/response objects: the public API calls it without Express
// (rest/facade.ts), /trpc mounts it in Express; each says how a rejection is written (`reject`).
import type { IncomingMessage, ServerResponse } from "node:http";
import { AppError, logFailure, toAppError } from "../errors.js";
import { headerOf, sendEnvelope } from "../http.js";
import type { QuotaState } from "../limits/quotas.js";
import type { Services } from "../services.js";
import { authenticate } from "./authenticate.js";
import { hashKey } from "./keys.js";

export function setQuotaHeaders(res: ServerResponse, q: QuotaState): void {
  res.setHeader("X-RateLimit-Limit", String(q.limit));
  res.setHeader("X-RateLimit-Remaining", String(q.remaining));
  res.setHeader("X-RateLimit-Reset", String(q.reset));
  if (q.retryAfter !== undefined) res.setHeader("Retry-After", String(q.retryAfter));
}

export type Reject = (req: IncomingMessage, res: ServerResponse, err: AppError) => void;

export function guard(
  services: Services,
  reject: Reject = sendEnvelope,
): (req: IncomingMessage, res: ServerResponse, next: (err?: unknown) => void) => Promise<void> {
  return async (req, res, next) => {
    const presented = headerOf(req, "x-api-key");
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
