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
import { hashKey, keyPrefix } from "./keys.js";

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
    // An instance with no other request in flight counts the request in Redis while the key is being
    // looked up, and gives the count back if the key does not authenticate: the two round trips
    // overlap, one Redis round trip less of latency. A busy instance counts after the lookup (one
    // round trip after the other cost less CPU per request under load: docs/decisions.md, "GET /me at
    // one connection"). Only a well-formed key is counted early: anything else is refused without a
    // lookup.
    const raw = presented?.trim() ?? "";
    const hash = services.quotas.shared && services.metrics.inFlight <= 1 && keyPrefix(raw) ? hashKey(raw) : undefined;
    const early = hash ? services.quotas.count(hash) : undefined;
    let settled = false;
    try {
      const caller = await authenticate(services.db, presented, services.now(), hash);
      const q = early
        ? await services.quotas.settle(caller.keyHash, await early, caller.limits, services.now().getTime())
        : await services.quotas.consume(caller.keyHash, caller.limits, services.now().getTime());
      settled = true;
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
      const anonymous = services.config.anonymousPerMinute;
      if (early && !settled) setQuotaHeaders(res, await services.quotas.refund(hash!, await early, anonymous, services.now().getTime()));
      else if (!res.hasHeader("X-RateLimit-Limit")) setQuotaHeaders(res, await services.quotas.peek(hashKey(presented ?? ""), anonymous, services.now().getTime()));
      reject(req, res, app);
    }
  };
}
