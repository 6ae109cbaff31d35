// Per-key quotas: a fixed minute window and a fixed day window, counted by the key's hash (never by
// client address), shared through Redis when REDIS_URL is set and in-process otherwise.
// Ceilings are per request (plan or tenant override, read fresh by authentication), so the
// limiters count without a ceiling of their own and the comparison happens here.
// Redis down: rate-limiter-flexible's insurance limiter counts in process memory, i.e. quotas fall
// back to per-instance limits until Redis answers again (documented in docs/decisions.md).
import type { Redis } from "ioredis";
import { RateLimiterMemory, RateLimiterRedis, type RateLimiterAbstract, type RateLimiterRes } from "rate-limiter-flexible";

export interface QuotaState {
  /** The per-minute ceiling (X-RateLimit-Limit). */
  limit: number;
  remaining: number;
  /** Unix seconds at which the exhausted (or, when none is, the minute) window resets. */
  reset: number;
  /** Seconds to wait, set when the request is over a ceiling. */
  retryAfter?: number;
}

const UNBOUNDED = 2 ** 31 - 1;

function limiter(redis: Redis | undefined, keyPrefix: string, duration: number): RateLimiterAbstract {
  const memory = new RateLimiterMemory({ keyPrefix, points: UNBOUNDED, duration });
  if (!redis) return memory;
  return new RateLimiterRedis({ storeClient: redis, keyPrefix, points: UNBOUNDED, duration, insuranceLimiter: memory });
}

export class Quotas {
  private readonly minute: RateLimiterAbstract;
  private readonly day: RateLimiterAbstract;

  constructor(redis?: Redis, namespace = "rl") {
    this.minute = limiter(redis, `${namespace}:m`, 60);
    this.day = limiter(redis, `${namespace}:d`, 86_400);
  }

  /** Counts one request of the key against both windows. */
  async consume(keyHash: string, limits: { perMinute: number; perDay: number }, now = Date.now()): Promise<QuotaState> {
    const m = await this.minute.consume(keyHash);
    const minuteReset = resetAt(m, now);
    if (m.consumedPoints > limits.perMinute) {
      return { limit: limits.perMinute, remaining: 0, reset: minuteReset, retryAfter: waitSeconds(m) };
    }
    const d = await this.day.consume(keyHash);
    if (d.consumedPoints > limits.perDay) {
      return { limit: limits.perMinute, remaining: 0, reset: resetAt(d, now), retryAfter: waitSeconds(d) };
    }
    const remaining = Math.max(0, Math.min(limits.perMinute - m.consumedPoints, limits.perDay - d.consumedPoints));
    return { limit: limits.perMinute, remaining, reset: minuteReset };
  }

  /** The minute window of a key at a given ceiling, without counting (for rejected credentials). */
  async peek(keyHash: string, perMinute: number, now = Date.now()): Promise<QuotaState> {
    let res: RateLimiterRes | null = null;
    try {
      res = await this.minute.get(keyHash);
    } catch {
      res = null;
    }
    const used = res?.consumedPoints ?? 0;
    const reset = res ? resetAt(res, now) : Math.ceil((now + 60_000) / 1000);
    return { limit: perMinute, remaining: Math.max(0, perMinute - used), reset };
  }
}

const resetAt = (r: RateLimiterRes, now: number) => Math.ceil((now + Math.max(r.msBeforeNext, 1)) / 1000);
const waitSeconds = (r: RateLimiterRes) => Math.max(1, Math.ceil(r.msBeforeNext / 1000));
