// The first step of every /public/v1 (and /trpc) request: authenticate the key, apply the plan
// gate, count the request against the key's quotas and set the X-RateLimit-* headers — on every
// response, including 401 and 403, where they describe the presented key's hash at the default
// ceiling (ANONYMOUS_RATE_LIMIT_PER_MINUTE) without counting it. The guard asks the quota module
// once (Quotas.admit(), server/limits/quotas.ts: the rate-limit rules, and the order of the key
// lookup and the count) and applies its decision. It has no exemptions: it is mounted with Express's
// own path matching on each prefix it guards (so every spelling that reaches a handler passes it),
// and what is public (GET/HEAD /public/v1/openapi.json) is routed before it.
// Written on node's request/response objects: the public API calls it without Express
// (rest/facade.ts), /trpc mounts it in Express; each says how a rejection is written (`reject`).
import type { IncomingMessage, ServerResponse } from "node:http";
import { type AppError, logFailure, toAppError } from "../errors.js";
import { headerOf, sendEnvelope } from "../http.js";
import type { Admission, QuotaState } from "../limits/quotas.js";
import type { Services } from "../services.js";
import { exchangeOf, requestIdOf } from "../exchange.js";
import { authenticate, type Caller } from "./authenticate.js";
import { hashKey, keyPrefix } from "./keys.js";
import { UnknownPrefixes } from "./unknown-prefixes.js";

export function setQuotaHeaders(res: ServerResponse, q: QuotaState): void {
  res.setHeader("X-RateLimit-Limit", String(q.limit));
  res.setHeader("X-RateLimit-Remaining", String(q.remaining));
  res.setHeader("X-RateLimit-Reset", String(q.reset));
  if (q.retryAfter !== undefined) res.setHeader("Retry-After", String(q.retryAfter));
  const { policy, limit } = rateLimitFields(q);
  res.setHeader("RateLimit-Policy", policy);
  res.setHeader("RateLimit", limit);
}

/**
 * The IETF fields (draft-ietf-httpapi-ratelimit-headers-09 and later) of a quota state: each window
 * as a policy (`q` its ceiling, `w` its length in seconds) and its state (`r` left, `t` seconds to
 * its reset), e.g. `"minute";q=180;w=60, "day";q=50000;w=86400`.
 */
export function rateLimitFields(q: QuotaState): { policy: string; limit: string } {
  return {
    policy: q.windows.map((w) => `"${w.name}";q=${w.quota};w=${w.seconds}`).join(", "),
    limit: q.windows
      .filter((w) => w.known !== false)
      .map((w) => `"${w.name}";r=${w.remaining};t=${w.resetIn}`)
      .join(", "),
  };
}

/**
 * What the quota decision needs besides the key, made once per transport: the key lookup
 * (authentication and the plan gate, server/auth/authenticate.ts), the ceiling of a refused key's
 * headers, the load, the clock. The prefixes no key has: one negative cache per service, shared by
 * its transports (/public/v1, /trpc, the in-process core).
 */
export function keyAdmission(services: Services): Admission<Caller> {
  services.unknownPrefixes ??= new UnknownPrefixes();
  const unknown = services.unknownPrefixes;
  return {
    lookup: (presented, keyHash) => authenticate(services.db, presented, services.now(), keyHash, unknown),
    anonymousPerMinute: services.config.anonymousPerMinute,
    // A waiting long-poll or subscription is no load for the quota's bookkeeping (server/wakeups.ts).
    inFlight: () => services.metrics.inFlight - (services.wakeups?.stats.waiters ?? 0),
    now: () => services.now(),
  };
}

/**
 * The admission of one more request of a caller already authenticated for this request (a /trpc
 * batch's further calls, a subscription's pages): counted at the key's ceilings, no lookup.
 */
export function admittedCaller(services: Services, caller: Caller): Admission<Caller> {
  return {
    lookup: async () => caller,
    anonymousPerMinute: services.config.anonymousPerMinute,
    inFlight: () => 2, // count at the key's ceilings, no count beside a lookup
    now: () => services.now(),
  };
}

/** The quota's one decision for a presented key (every transport's, the in-process core's too). */
export function admitKey(services: Services, admission: Admission<Caller>, presented: string | undefined) {
  // Only a well-formed key has a hash: anything else is refused without a lookup and never counted.
  // Nor does a prefix remembered as no key's: its window is never counted (nothing to count beside
  // the lookup, nothing to read for its headers), and the lookup refuses it without a round trip.
  const raw = presented?.trim() ?? "";
  const prefix = keyPrefix(raw);
  const keyHash = prefix && !services.unknownPrefixes?.has(prefix) ? hashKey(raw) : undefined;
  return services.quotas.admit(presented, keyHash, admission);
}

export type Reject = (req: IncomingMessage, res: ServerResponse, err: AppError) => void;

export function guard(
  services: Services,
  reject: Reject = sendEnvelope,
): (req: IncomingMessage, res: ServerResponse, next: (err?: unknown) => void) => Promise<void> {
  const admission = keyAdmission(services);
  return async (req, res, next) => {
    try {
      const decision = await admitKey(services, admission, headerOf(req, "x-api-key"));
      setQuotaHeaders(res, decision.quota);
      if (decision.admitted) {
        const x = exchangeOf(req);
        x.caller = decision.caller;
        x.quota = decision.quota;
        return next();
      }
      const app = toAppError(decision.refusal);
      if (decision.quota.window) services.metrics.rateLimited.inc({ window: decision.quota.window });
      else logFailure(services.logger, requestIdOf(req), decision.refusal, app);
      reject(req, res, app);
    } catch (err) {
      // next() or reject() threw (admit() does not reject).
      const app = toAppError(err);
      logFailure(services.logger, requestIdOf(req), err, app);
      reject(req, res, app);
    }
  };
}
