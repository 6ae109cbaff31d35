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

// Both windows in one Redis round trip, with the same keys, values and expiry as rate-limiter-flexible
// (its memory insurance and its `get` in peek() read them): a window is a counter whose TTL is the
// window's length from its first request. The library's own script is `SET key 0 EX secs NX`,
// `INCRBY key 1`, `PTTL key` (and `EXPIRE` if the key had no TTL); this one is `INCR` and `PTTL`, the
// expiry set only when the key has none (a new window, or a key left without one): the same state,
// two commands per window instead of three, inline (no Lua closure made per call). Measured on a
// quiet machine: 18.7 → 11.8 µs of Redis time per request (docs/decisions.md, "GET /me at one
// connection").
const countWindow = (i: 1 | 2, secs: number, n: string, ttl: string) => `
local ${n} = redis.call('incr', KEYS[${i}])
local ${ttl} = redis.call('pttl', KEYS[${i}])
if ${ttl} < 0 then
  redis.call('expire', KEYS[${i}], ${secs})
  ${ttl} = ${secs * 1000}
end`;

/** Counts a request whose ceiling is known (ARGV[1]: per minute): the day window is not counted for a request already over its minute ceiling. */
const CONSUME_BOTH = `${countWindow(1, 60, "m", "mt")}
if m > tonumber(ARGV[1]) then return {m, mt} end${countWindow(2, 86_400, "d", "dt")}
return {m, mt, d, dt}`;

/** Counts a request in both windows before its key is known to be valid (Quotas.count); settle() or refund() follows. */
const COUNT_BOTH = `${countWindow(1, 60, "m", "mt")}${countWindow(2, 86_400, "d", "dt")}
return {m, mt, d, dt}`;

/**
 * Gives one request back to each window in KEYS; a window left at 0 (or below: it expired in between
 * and DECR made it anew) is deleted, as if the request had never been counted. Returns the count and
 * PTTL of each window after (0 and -2 for a deleted one).
 */
const GIVE_BACK = `
local r = {}
for i, key in ipairs(KEYS) do
  local n = redis.call('decr', key)
  local ttl = -2
  if n <= 0 then
    redis.call('del', key)
    n = 0
  else
    ttl = redis.call('pttl', key)
  end
  r[2 * i - 1] = n
  r[2 * i] = ttl
end
return r`;

type ConsumeBoth = (minuteKey: string, dayKey: string, perMinute: string) => Promise<number[]>;

/** A request counted in both windows before its key was known to be valid: in Redis, or in process memory when Redis did not answer. */
export interface Counted {
  minute: Window;
  day: Window;
  memory: boolean;
}

export class Quotas {
  private readonly minute: RateLimiterAbstract;
  private readonly day: RateLimiterAbstract;
  /** The in-process windows: the limiters themselves without Redis, their insurance with it. */
  private readonly memoryMinute: RateLimiterMemory;
  private readonly memoryDay: RateLimiterMemory;
  private readonly consumeBoth?: ConsumeBoth;
  private readonly countBoth?: (minuteKey: string, dayKey: string) => Promise<number[]>;
  private readonly giveBack?: (...keys: string[]) => Promise<number[]>;
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
      if (typeof (redis as any).crmCountQuotas !== "function") redis.defineCommand("crmCountQuotas", { numberOfKeys: 2, lua: COUNT_BOTH });
      this.countBoth = (m, d) => (redis as any).crmCountQuotas(m, d);
      // numberOfKeys unset: the first argument says how many keys follow (one window or both).
      if (typeof (redis as any).crmGiveBackQuotas !== "function") redis.defineCommand("crmGiveBackQuotas", { lua: GIVE_BACK });
      this.giveBack = (...keys) => (redis as any).crmGiveBackQuotas(keys.length, ...keys);
    }
  }

  /** Whether the windows are shared through Redis (a round trip that count() can overlap with the key lookup). */
  get shared(): boolean {
    return this.countBoth !== undefined;
  }

  /**
   * Counts one request of the key in both windows before the key is known to be valid (server/auth/guard.ts
   * sends this beside the key lookup). Never rejects: Redis not answering, it counts in process memory.
   * Followed by settle() once the key's ceilings are known, or by refund() if the key did not authenticate.
   */
  async count(keyHash: string): Promise<Counted> {
    if (this.countBoth) {
      try {
        const [minuteKey, dayKey] = redisQuotaKeys(this.namespace, keyHash);
        const r = await this.countBoth(minuteKey, dayKey);
        this.fallback = false;
        return { minute: { consumed: Number(r[0]), ms: Number(r[1]) }, day: { consumed: Number(r[2]), ms: Number(r[3]) }, memory: false };
      } catch {
        this.fallback = true;
        this.fallbackCount += 1;
      }
    }
    const key = quotaKey(keyHash);
    const m = await this.memoryMinute.consume(key);
    const d = await this.memoryDay.consume(key);
    return { minute: { consumed: m.consumedPoints, ms: m.msBeforeNext }, day: { consumed: d.consumedPoints, ms: d.msBeforeNext }, memory: true };
  }

  /**
   * The quota state of a request count() counted, at the key's ceilings: the same as consume() gives.
   * Over its minute ceiling, the request is given back to the day window, which consume() does not
   * count for such a request.
   */
  async settle(keyHash: string, counted: Counted, limits: { perMinute: number; perDay: number }, now = Date.now()): Promise<QuotaState> {
    if (counted.minute.consumed <= limits.perMinute) return state(limits, now, counted.minute, counted.day);
    await this.giveBackOne(keyHash, counted.memory, false);
    return state(limits, now, counted.minute);
  }

  /**
   * Gives back a request count() counted whose key did not authenticate (401, 403 plan, an outage):
   * nothing of it stays in either window. The state is the key's minute window after, at `perMinute`,
   * as peek() would read it.
   */
  async refund(keyHash: string, counted: Counted, perMinute: number, now = Date.now()): Promise<QuotaState> {
    const minute = await this.giveBackOne(keyHash, counted.memory, true);
    const used = minute?.consumed ?? 0;
    const reset = minute && minute.ms > 0 ? resetAt(minute.ms, now) : Math.ceil((now + 60_000) / 1000);
    return { limit: perMinute, remaining: Math.max(0, perMinute - used), reset };
  }

  /** Gives one request back to the day window, and to the minute window too if `both`; the minute window after (undefined if unknown). */
  private async giveBackOne(keyHash: string, memory: boolean, both: boolean): Promise<Window | undefined> {
    try {
      if (!memory && this.giveBack) {
        const [minuteKey, dayKey] = redisQuotaKeys(this.namespace, keyHash);
        const r = both ? await this.giveBack(minuteKey, dayKey) : await this.giveBack(dayKey);
        return both ? { consumed: Number(r[0]), ms: Number(r[1]) } : undefined;
      }
      const key = quotaKey(keyHash);
      const giveBack = async (limiter: RateLimiterMemory) => {
        const res = await limiter.reward(key, 1);
        if (res.consumedPoints > 0) return { consumed: res.consumedPoints, ms: res.msBeforeNext };
        await limiter.delete(key);
        return { consumed: 0, ms: 0 };
      };
      await giveBack(this.memoryDay);
      return both ? await giveBack(this.memoryMinute) : undefined;
    } catch {
      // Redis stopped answering in between: the count stays until its window ends (an over-count of one).
      return undefined;
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
