// Per-key quotas: a fixed minute window and a fixed day window, counted by the key's hash (never by
// client address), shared through Redis when REDIS_URL is set and in-process otherwise.
// Ceilings are per request (plan or tenant override, read fresh by authentication), so the
// limiters count without a ceiling of their own and the comparison happens here.
// With Redis, both windows are counted in one round trip (CONSUME_BOTH: rate-limiter-flexible's
// script, keys and expiry, twice in one call). Redis down: the in-process windows (the limiters'
// insurance) count, i.e. quotas fall back to per-instance limits until Redis answers again
// (documented in docs/decisions.md).
// Redis Cluster: both windows of a key are in one script call, so their Redis keys carry the key
// hash as a hash tag ("rl:m:{<hash>}", "rl:d:{<hash>}"): one slot per API key, never CROSSSLOT, and
// different keys spread over the cluster.
import { RateLimiterMemory, RateLimiterRedis, type RateLimiterAbstract, type RateLimiterRes } from "rate-limiter-flexible";
import type { RedisClient } from "../redis.js";

export interface QuotaState {
  /** The per-minute ceiling (X-RateLimit-Limit). */
  limit: number;
  remaining: number;
  /** Unix seconds at which the exhausted (or, when none is, the minute) window resets. */
  reset: number;
  /** Seconds to wait, set when the request is over a ceiling. */
  retryAfter?: number;
  /** The window that refused the request (with retryAfter). */
  window?: "minute" | "day";
}

/** The limiter key of an API key hash: the hash as a Redis Cluster hash tag (one slot for both windows). */
export const quotaKey = (keyHash: string) => `{${keyHash}}`;

/** The Redis keys of both windows of an API key, as stored (rate-limiter-flexible's `<prefix>:<key>`). */
export const redisQuotaKeys = (namespace: string, keyHash: string) => [`${namespace}:m:${quotaKey(keyHash)}`, `${namespace}:d:${quotaKey(keyHash)}`] as const;

const UNBOUNDED = 2 ** 31 - 1;

function limiter(redis: RedisClient | undefined, keyPrefix: string, duration: number, memory: RateLimiterMemory): RateLimiterAbstract {
  if (!redis) return memory;
  return new RateLimiterRedis({ storeClient: redis, keyPrefix, points: UNBOUNDED, duration, insuranceLimiter: memory });
}

// Both windows in one Redis round trip, with rate-limiter-flexible's own per-window script (same
// keys, same values, same expiry) and the same rule as the two-call version: the day window is not
// counted for a request already over its minute ceiling.
const CONSUME_BOTH = `
local function hit(key, secs)
  redis.call('set', key, 0, 'EX', secs, 'NX')
  local consumed = redis.call('incrby', key, 1)
  local ttl = redis.call('pttl', key)
  if ttl == -1 then
    redis.call('expire', key, secs)
    ttl = 1000 * secs
  end
  return {consumed, ttl}
end
local m = hit(KEYS[1], 60)
if m[1] > tonumber(ARGV[1]) then return {m[1], m[2]} end
local d = hit(KEYS[2], 86400)
return {m[1], m[2], d[1], d[2]}`;

type ConsumeBoth = (minuteKey: string, dayKey: string, perMinute: string) => Promise<number[]>;

export class Quotas {
  private readonly minute: RateLimiterAbstract;
  private readonly day: RateLimiterAbstract;
  /** The in-process windows: the limiters themselves without Redis, their insurance with it. */
  private readonly memoryMinute: RateLimiterMemory;
  private readonly memoryDay: RateLimiterMemory;
  private readonly consumeBoth?: ConsumeBoth;
  /** True while the last Redis call failed and requests are counted in process memory. */
  fallback = false;
  /** Requests counted in process memory because Redis did not answer. */
  fallbackCount = 0;

  constructor(
    redis?: RedisClient,
    private readonly namespace = "rl",
  ) {
    this.memoryMinute = new RateLimiterMemory({ keyPrefix: `${namespace}:m`, points: UNBOUNDED, duration: 60 });
    this.memoryDay = new RateLimiterMemory({ keyPrefix: `${namespace}:d`, points: UNBOUNDED, duration: 86_400 });
    this.minute = limiter(redis, `${namespace}:m`, 60, this.memoryMinute);
    this.day = limiter(redis, `${namespace}:d`, 86_400, this.memoryDay);
    if (redis) {
      if (typeof (redis as any).crmConsumeQuotas !== "function") redis.defineCommand("crmConsumeQuotas", { numberOfKeys: 2, lua: CONSUME_BOTH });
      this.consumeBoth = (m, d, perMinute) => (redis as any).crmConsumeQuotas(m, d, perMinute);
    }
  }

  /** Counts one request of the key against both windows. */
  async consume(keyHash: string, limits: { perMinute: number; perDay: number }, now = Date.now()): Promise<QuotaState> {
    const key = quotaKey(keyHash);
    if (this.consumeBoth) {
      let r: number[] | undefined;
      try {
        const [minuteKey, dayKey] = redisQuotaKeys(this.namespace, keyHash);
        r = await this.consumeBoth(minuteKey, dayKey, String(limits.perMinute));
        this.fallback = false;
      } catch {
        r = undefined; // Redis unavailable: the in-process windows, as rate-limiter-flexible's insurance does.
        this.fallback = true;
        this.fallbackCount += 1;
      }
      if (r) return state(limits, now, { consumed: Number(r[0]), ms: Number(r[1]) }, r.length > 2 ? { consumed: Number(r[2]), ms: Number(r[3]) } : undefined);
      return this.consumeWith(this.memoryMinute, this.memoryDay, key, limits, now);
    }
    return this.consumeWith(this.minute, this.day, key, limits, now);
  }

  private async consumeWith(
    minute: RateLimiterAbstract,
    day: RateLimiterAbstract,
    keyHash: string,
    limits: { perMinute: number; perDay: number },
    now: number,
  ): Promise<QuotaState> {
    const m = await minute.consume(keyHash);
    if (m.consumedPoints > limits.perMinute) return state(limits, now, { consumed: m.consumedPoints, ms: m.msBeforeNext });
    const d = await day.consume(keyHash);
    return state(limits, now, { consumed: m.consumedPoints, ms: m.msBeforeNext }, { consumed: d.consumedPoints, ms: d.msBeforeNext });
  }

  /** The minute window of a key at a given ceiling, without counting (for rejected credentials). */
  async peek(keyHash: string, perMinute: number, now = Date.now()): Promise<QuotaState> {
    let res: RateLimiterRes | null = null;
    try {
      res = await this.minute.get(quotaKey(keyHash));
    } catch {
      res = null;
    }
    const used = res?.consumedPoints ?? 0;
    const reset = res ? resetAt(res.msBeforeNext, now) : Math.ceil((now + 60_000) / 1000);
    return { limit: perMinute, remaining: Math.max(0, perMinute - used), reset };
  }
}

interface Window {
  consumed: number;
  /** Milliseconds before the window resets. */
  ms: number;
}

/** The quota state after counting: over the minute ceiling (day not counted), over the day ceiling, or within both. */
function state(limits: { perMinute: number; perDay: number }, now: number, m: Window, d?: Window): QuotaState {
  const minuteReset = resetAt(m.ms, now);
  if (m.consumed > limits.perMinute || !d) return { limit: limits.perMinute, remaining: 0, reset: minuteReset, retryAfter: waitSeconds(m.ms), window: "minute" };
  if (d.consumed > limits.perDay) return { limit: limits.perMinute, remaining: 0, reset: resetAt(d.ms, now), retryAfter: waitSeconds(d.ms), window: "day" };
  const remaining = Math.max(0, Math.min(limits.perMinute - m.consumed, limits.perDay - d.consumed));
  return { limit: limits.perMinute, remaining, reset: minuteReset };
}

const resetAt = (msBeforeNext: number, now: number) => Math.ceil((now + Math.max(msBeforeNext, 1)) / 1000);
const waitSeconds = (msBeforeNext: number) => Math.max(1, Math.ceil(msBeforeNext / 1000));
