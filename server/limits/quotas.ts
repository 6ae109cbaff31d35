// Per-key quotas: the one rate-limit decision of a request. server/auth/guard.ts calls
// Quotas.admit() once per request and applies what it returns (headers, then the request served or
// refused); admit() runs the key lookup and the count in the order it chooses. The rules:
// 1. A request is counted by its API key's hash (never by client address) in two fixed windows, a
//    minute and a day, each starting with its first request. The ceilings are the key's own: the
//    tenant's override, else its plan's, read fresh by the key lookup on every request.
// 2. A key that does not authenticate is counted in neither window: missing or malformed (refused
//    without a lookup), unknown, wrong secret, revoked, expired, a plan without API access (403), or
//    the lookup failing (an outage). Its response still carries X-RateLimit-*: the presented key's
//    minute window at ANONYMOUS_RATE_LIMIT_PER_MINUTE, without counting (a 401 never turns into a 429).
// 3. Over the minute ceiling: 429, and the day window does not count the request. Over the day
//    ceiling: 429. Within both: admitted, and it stays counted even if it then fails (403 scope, 422,
//    404, 409).
// 4. Headers: X-RateLimit-Limit is the minute ceiling; X-RateLimit-Remaining the smaller of what is
//    left in the minute and in the day; X-RateLimit-Reset the Unix second at which the window that
//    refused (else the minute window) resets; a 429 adds Retry-After, the seconds until then (≥ 1).
//
// How, none of which changes a decision:
// - With Redis (REDIS_URL, or a cluster), the windows are shared by every instance; both are counted
//   in one script call (CONSUME_BOTH: the keys, values and expiry of rate-limiter-flexible, whose
//   memory insurance and `get` read them). Redis not answering: the in-process windows count, i.e.
//   quotas fall back to per-instance limits until Redis answers again (`fallback`, a metric).
// - Redis Cluster: both windows of a key are in one script call, so their Redis keys carry the key's
//   hash as a hash tag ("rl:m:{<hash>}", "rl:d:{<hash>}"): one slot per API key, never CROSSSLOT,
//   and different keys spread over the cluster.
// - The count beside the lookup: on an instance with no other request in flight, a well-formed key's
//   request is counted in Redis while the key is being looked up (count(): both windows, no ceiling
//   yet), one Redis round trip less of latency; the lookup then settles it (settle(): over the minute
//   ceiling, the day window gives its count back) or, the key failing, refunds it (refund(): both
//   windows as if never counted). A busy instance counts after the lookup (the overlap costs CPU
//   under load): docs/decisions/performance.md, "The quota count beside the key lookup".
import {
  RateLimiterMemory,
  RateLimiterRedis,
  type RateLimiterAbstract,
  type RateLimiterRes,
} from "rate-limiter-flexible";
import { AppError } from "../errors.js";
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
  /**
   * Each window the answer describes (RateLimit-Policy / RateLimit, draft-ietf-httpapi-ratelimit-headers):
   * its ceiling, what is left of it and the seconds until it resets. A key that did not authenticate
   * has the anonymous minute only; over the minute ceiling the day window was not read (`known: false`).
   */
  windows: QuotaWindow[];
}

export interface QuotaWindow {
  name: "minute" | "day";
  /** The ceiling (q) and the window's length in seconds (w). */
  quota: number;
  seconds: number;
  /** Counted in the window, and left in it (r); seconds until it resets (t). */
  used: number;
  /** false: only the ceiling is known (RateLimit-Policy names it, RateLimit leaves it out). */
  known?: false;
  remaining: number;
  resetIn: number;
}

/** A key's ceilings (the tenant's override, else its plan's). */
export interface Limits {
  perMinute: number;
  perDay: number;
}

/** What a successful key lookup gives admit(): the key's hash and its ceilings. */
export interface Admittee {
  keyHash: string;
  limits: Limits;
}

/**
 * What admit() needs besides the request's key, made once by the guard (nothing is allocated per
 * request: admit() hands `lookup` the key it was given).
 */
export interface Admission<C extends Admittee> {
  /** The key lookup (authentication and the plan gate): the caller, or a throw (401, 403 plan, an outage). */
  lookup(presented: string | undefined, keyHash: string | undefined): Promise<C>;
  /** The per-minute ceiling the headers of a key that did not authenticate describe (rule 2). */
  anonymousPerMinute: number;
  /** Requests of this instance in flight, this one included: 1 is an idle instance. */
  inFlight(): number;
  now(): Date;
}

/**
 * admit()'s answer: the guard sets `quota` as the X-RateLimit-* /
 * Retry-After headers, then serves `caller` or answers `refusal`.
 */
export type Decision<C> =
  | { admitted: true; caller: C; quota: QuotaState }
  /**
   * `refusal`: what the lookup threw (401, 403 plan, an outage; counted nowhere, no caller), or 429
   * RATE_LIMIT_EXCEEDED (counted; `caller` set, `quota.window` names the window that refused).
   */
  | { admitted: false; caller?: C; quota: QuotaState; refusal: unknown };

/** The limiter key of an API key hash: the hash as a Redis Cluster hash tag (one slot for both windows). */
export const quotaKey = (keyHash: string) => `{${keyHash}}`;

/** The Redis keys of both windows of an API key, as stored (rate-limiter-flexible's `<prefix>:<key>`). */
export const redisQuotaKeys = (namespace: string, keyHash: string) =>
  [`${namespace}:m:${quotaKey(keyHash)}`, `${namespace}:d:${quotaKey(keyHash)}`] as const;

const UNBOUNDED = 2 ** 31 - 1;

// Both windows in one Redis round trip, with the same keys, values and expiry as rate-limiter-flexible
// (its memory insurance and its `get` in peek() read them): a window is a counter whose TTL is the
// window's length from its first request. The library's own script is `SET key 0 EX secs NX`,
// `INCRBY key 1`, `PTTL key` (and `EXPIRE` if the key had no TTL); this one is `INCR` and `PTTL`, the
// expiry set only when the key has none (a new window, or a key left without one): the same state,
// two commands per window instead of three, inline (no Lua closure made per call). Measured on a
// quiet machine: 18.7 → 11.8 µs of Redis time per request (docs/decisions/performance.md,
// "The quota script: INCR and PTTL per window").
const countWindow = (i: 1 | 2, secs: number, n: string, ttl: string) => `
local ${n} = redis.call('incr', KEYS[${i}])
local ${ttl} = redis.call('pttl', KEYS[${i}])
if ${ttl} < 0 then
  redis.call('expire', KEYS[${i}], ${secs})
  ${ttl} = ${secs * 1000}
end`;

/**
 * Counts a request whose ceiling is known (ARGV[1]: per minute): the day
 * window is not counted for a request already over its minute ceiling.
 */
const CONSUME_BOTH = `${countWindow(1, 60, "m", "mt")}
if m > tonumber(ARGV[1]) then return {m, mt} end${countWindow(2, 86_400, "d", "dt")}
return {m, mt, d, dt}`;

/**
 * Counts a request in both windows before its key is known to be valid (Quotas.count); settle() or refund() follows.
 */
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

/** The scripts defineCommand adds to a client: ioredis types such commands only where they are declared. */
interface QuotaCommands {
  crmConsumeQuotas?: ConsumeBoth;
  crmCountQuotas?: (minuteKey: string, dayKey: string) => Promise<number[]>;
  crmGiveBackQuotas?: (keyCount: number, ...keys: string[]) => Promise<number[]>;
}

/**
 * A request counted in both windows before its key was known to be
 * valid: in Redis, or in process memory when Redis did not answer.
 */
export interface Counted {
  minute: Window;
  day: Window;
  memory: boolean;
}

export class Quotas {
  /**
   * The minute window as peek() reads it: rate-limiter-flexible's Redis
   * limiter (its memory insurance when Redis fails), or the in-process window.
   */
  private readonly minute: RateLimiterAbstract;
  private readonly day: RateLimiterAbstract;
  /** The in-process windows: the only ones without Redis, the fallback with it. */
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
    this.minute = redis
      ? new RateLimiterRedis({
          storeClient: redis,
          keyPrefix: `${namespace}:m`,
          points: UNBOUNDED,
          duration: 60,
          insuranceLimiter: this.memoryMinute,
        })
      : this.memoryMinute;
    this.day = redis
      ? new RateLimiterRedis({
          storeClient: redis,
          keyPrefix: `${namespace}:d`,
          points: UNBOUNDED,
          duration: 86_400,
          insuranceLimiter: this.memoryDay,
        })
      : this.memoryDay;
    if (redis) {
      const client: RedisClient & QuotaCommands = redis;
      if (typeof client.crmConsumeQuotas !== "function")
        redis.defineCommand("crmConsumeQuotas", { numberOfKeys: 2, lua: CONSUME_BOTH });
      this.consumeBoth = (m, d, perMinute) => client.crmConsumeQuotas!(m, d, perMinute);
      if (typeof client.crmCountQuotas !== "function")
        redis.defineCommand("crmCountQuotas", { numberOfKeys: 2, lua: COUNT_BOTH });
      this.countBoth = (m, d) => client.crmCountQuotas!(m, d);
      // numberOfKeys unset: the first argument says how many keys follow (one window or both).
      if (typeof client.crmGiveBackQuotas !== "function") redis.defineCommand("crmGiveBackQuotas", { lua: GIVE_BACK });
      this.giveBack = (...keys) => client.crmGiveBackQuotas!(keys.length, ...keys);
    }
  }

  /** Whether the windows are shared through Redis (a round trip that count() can overlap with the key lookup). */
  get shared(): boolean {
    return this.countBoth !== undefined;
  }

  /**
   * The request's decision, by the rules above: looks the key up (`how.lookup`) and counts the
   * request, in the order that costs least, and says what to answer. Never rejects: a failing lookup
   * is a refusal, and Redis not answering counts in process memory.
   * `keyHash`: SHA-256 of the presented key (trimmed) when it is well formed, else undefined (a
   * missing or malformed key is never counted, and its window is empty).
   */
  async admit<C extends Admittee>(
    presented: string | undefined,
    keyHash: string | undefined,
    how: Admission<C>,
  ): Promise<Decision<C>> {
    // An idle instance on Redis counts a well-formed key's request now, beside the lookup.
    const early =
      keyHash !== undefined && this.countBoth !== undefined && how.inFlight() <= 1 ? this.count(keyHash) : undefined;
    let caller: C;
    try {
      caller = await how.lookup(presented, keyHash);
    } catch (refusal) {
      // Rule 2: counted nowhere (an early count is given back); the headers at the anonymous ceiling.
      const quota = early
        ? await this.refund(keyHash!, await early, how.anonymousPerMinute, how.now().getTime())
        : await this.peek(keyHash, how.anonymousPerMinute, how.now().getTime());
      return { admitted: false, quota, refusal };
    }
    // Rules 1 and 3: both windows, the day only within the minute ceiling; rule 4: the headers (state()).
    const limits = caller.limits;
    let quota: QuotaState;
    if (early) {
      // Counted without a ceiling: over the minute ceiling, settle() also gives the day window its count back.
      const counted = await early;
      const now = how.now().getTime();
      const { minute, day } = counted;
      quota =
        minute.consumed <= limits.perMinute
          ? state(limits, now, minute.consumed, minute.ms, day.consumed, day.ms)
          : await this.settle(keyHash!, counted, limits, now);
    } else {
      // Counted at the key's ceilings: one script call with Redis
      // (awaited here, not in a helper: one hop less per request).
      const now = how.now().getTime();
      let r: number[] | undefined;
      if (this.consumeBoth) {
        try {
          const tag = quotaKey(caller.keyHash); // redisQuotaKeys() without its array
          r = await this.consumeBoth(
            `${this.namespace}:m:${tag}`,
            `${this.namespace}:d:${tag}`,
            String(limits.perMinute),
          );
          this.fallback = false;
        } catch {
          this.redisFailed();
        }
      }
      quota = r
        ? state(limits, now, Number(r[0]), Number(r[1]), r.length > 2 ? Number(r[2]) : undefined, Number(r[3]))
        : await this.countInMemory(caller.keyHash, limits, now);
    }
    // Rule 3: over a ceiling, 429.
    if (quota.retryAfter === undefined) return { admitted: true, caller, quota };
    return {
      admitted: false,
      caller,
      quota,
      refusal: new AppError("RATE_LIMIT_EXCEEDED", "Rate limit exceeded for this API key", {
        retryAfter: quota.retryAfter,
      }),
    };
  }

  /**
   * admit()'s count beside the lookup: one request of the key in both windows, before the key is
   * known to be valid. Never rejects: Redis not answering, it counts in process memory. Followed by
   * settle() once the key's ceilings are known, or by refund() if the key did not authenticate.
   */
  async count(keyHash: string): Promise<Counted> {
    if (this.countBoth) {
      try {
        const tag = quotaKey(keyHash); // redisQuotaKeys() without its array
        const r = await this.countBoth(`${this.namespace}:m:${tag}`, `${this.namespace}:d:${tag}`);
        this.fallback = false;
        return {
          minute: { consumed: Number(r[0]), ms: Number(r[1]) },
          day: { consumed: Number(r[2]), ms: Number(r[3]) },
          memory: false,
        };
      } catch {
        this.redisFailed();
      }
    }
    const key = quotaKey(keyHash);
    const m = await this.memoryMinute.consume(key);
    const d = await this.memoryDay.consume(key);
    return {
      minute: { consumed: m.consumedPoints, ms: m.msBeforeNext },
      day: { consumed: d.consumedPoints, ms: d.msBeforeNext },
      memory: true,
    };
  }

  /**
   * The quota state of a request count() counted, at the key's ceilings: what counting after the
   * lookup gives. Over its minute ceiling, the request is given back to the day window (rule 3).
   */
  async settle(keyHash: string, counted: Counted, limits: Limits, now = Date.now()): Promise<QuotaState> {
    if (counted.minute.consumed <= limits.perMinute)
      return state(limits, now, counted.minute.consumed, counted.minute.ms, counted.day.consumed, counted.day.ms);
    await this.giveBackOne(keyHash, counted.memory, false);
    return state(limits, now, counted.minute.consumed, counted.minute.ms);
  }

  /**
   * Gives back a request count() counted whose key did not authenticate (401, 403 plan, an outage):
   * nothing of it stays in either window. The state is the key's minute window after, at `perMinute`,
   * as peek() would read it.
   */
  async refund(keyHash: string, counted: Counted, perMinute: number, now = Date.now()): Promise<QuotaState> {
    const minute = await this.giveBackOne(keyHash, counted.memory, true);
    return unauthenticated(perMinute, now, minute?.consumed ?? 0, minute && minute.ms > 0 ? minute.ms : undefined);
  }

  /**
   * Gives one request back to the day window, and to the minute window
   * too if `both`; the minute window after (undefined if unknown).
   */
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

  /**
   * Counts a request at the key's ceilings in the in-process windows (no Redis,
   * or Redis not answering): the day window only within the minute ceiling.
   */
  private async countInMemory(keyHash: string, limits: Limits, now: number): Promise<QuotaState> {
    const key = quotaKey(keyHash);
    const m = await this.memoryMinute.consume(key);
    if (m.consumedPoints > limits.perMinute) return state(limits, now, m.consumedPoints, m.msBeforeNext);
    const d = await this.memoryDay.consume(key);
    return state(limits, now, m.consumedPoints, m.msBeforeNext, d.consumedPoints, d.msBeforeNext);
  }

  private redisFailed(): void {
    this.fallback = true;
    this.fallbackCount += 1;
  }

  /**
   * The minute window of a key at a given ceiling, without counting (a key that
   * did not authenticate; none given: a malformed key, whose window is empty).
   */
  /**
   * Both windows of a key as they stand (nothing counted): what GET /me reports as use. A window
   * with no request yet is whole, resetting a full window from now (it starts with its first request).
   */
  async usage(keyHash: string, limits: Limits): Promise<QuotaWindow[]> {
    const read = (l: RateLimiterAbstract) => l.get(quotaKey(keyHash)).catch(() => null);
    const [m, d] = await Promise.all([read(this.minute), read(this.day)]);
    return [
      window("minute", limits.perMinute, 60, m?.consumedPoints ?? 0, m ? m.msBeforeNext : 60_000),
      window("day", limits.perDay, 86_400, d?.consumedPoints ?? 0, d ? d.msBeforeNext : 86_400_000),
    ];
  }

  private async peek(keyHash: string | undefined, perMinute: number, now: number): Promise<QuotaState> {
    if (keyHash === undefined) return unauthenticated(perMinute, now, 0, undefined);
    let res: RateLimiterRes | null = null;
    try {
      res = await this.minute.get(quotaKey(keyHash));
    } catch {
      res = null;
    }
    return unauthenticated(perMinute, now, res?.consumedPoints ?? 0, res ? res.msBeforeNext : undefined);
  }
}

interface Window {
  consumed: number;
  /** Milliseconds before the window resets. */
  ms: number;
}

/**
 * Rule 4, the headers of a counted request: over the minute ceiling (the day not counted: `d`
 * undefined), over the day ceiling, or within both.
 */
function state(limits: Limits, now: number, m: number, mMs: number, d?: number, dMs?: number): QuotaState {
  const minuteReset = resetAt(mMs, now);
  const windows: QuotaWindow[] = [window("minute", limits.perMinute, 60, m, mMs)];
  // Over the minute ceiling the day window was not read: its ceiling is still the key's policy.
  windows.push(
    d === undefined
      ? { ...window("day", limits.perDay, 86_400, 0, 0), known: false }
      : window("day", limits.perDay, 86_400, d, dMs!),
  );
  if (m > limits.perMinute || d === undefined)
    return {
      limit: limits.perMinute,
      remaining: 0,
      reset: minuteReset,
      retryAfter: waitSeconds(mMs),
      window: "minute",
      windows,
    };
  if (d > limits.perDay)
    return {
      limit: limits.perMinute,
      remaining: 0,
      reset: resetAt(dMs!, now),
      retryAfter: waitSeconds(dMs!),
      window: "day",
      windows,
    };
  return {
    limit: limits.perMinute,
    remaining: Math.max(0, Math.min(limits.perMinute - m, limits.perDay - d)),
    reset: minuteReset,
    windows,
  };
}

/** One window as RateLimit describes it: `used` requests of `quota`, `ms` before it resets. */
const window = (name: QuotaWindow["name"], quota: number, seconds: number, used: number, ms: number): QuotaWindow => ({
  name,
  quota,
  seconds,
  used,
  remaining: Math.max(0, quota - used),
  resetIn: Math.max(0, Math.ceil(ms / 1000)),
});

/**
 * Rule 2, the headers of a key that did not authenticate: its minute window
 * (`used`, `ms` before it resets; none: a new window) at `perMinute`.
 */
function unauthenticated(perMinute: number, now: number, used: number, ms: number | undefined): QuotaState {
  return {
    limit: perMinute,
    remaining: Math.max(0, perMinute - used),
    reset: ms === undefined ? Math.ceil((now + 60_000) / 1000) : resetAt(ms, now),
    windows: [window("minute", perMinute, 60, used, ms ?? 60_000)],
  };
}

const resetAt = (msBeforeNext: number, now: number) => Math.ceil((now + Math.max(msBeforeNext, 1)) / 1000);
const waitSeconds = (msBeforeNext: number) => Math.max(1, Math.ceil(msBeforeNext / 1000));
