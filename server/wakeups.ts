// Wake-ups of the changes feed's waiters (GET /public/v1/changes?wait=N and changes.subscribe;
// docs/decisions/api.md, "Long-poll and subscription"). A waiter holds no database connection: it
// awaits a wake-up of its tenant, then reads the feed again. A write of this instance wakes its
// tenant's waiters here at once and, through Redis pub/sub on the tenant's channel, every other
// instance's. A write the signals miss (the admin CLI, Redis down, a lost message) is found by the
// probe: every CHANGES_REREAD_MS (1 s by default) one statement per tenant that has waiters reads its
// feed's state (head, and whether changes wait to be placed), and a tenant whose state moved wakes
// its waiters — a change may come later, never be missed, and idle waiters cost one cheap statement a
// tick per tenant, not a read per waiter. Not LISTEN/NOTIFY: it does not pass PgBouncer's transaction
// pooling nor cross Citus nodes. Signals carry a tenant id, never data.
import { Cluster } from "ioredis";
import type { Logger } from "./logger.js";
import type { RedisClient } from "./redis.js";

/** Waiters of one API key on one instance; past it a long-poll answers at once with a `backoff`. */
export const MAX_WAITERS_PER_KEY = 2;
/** The channel of a tenant's wake-ups (one per tenant: a subscriber hears only its waiters' tenants). */
export const wakeupChannel = (tenantId: string) => `crm:changes:${tenantId}`;

/** The longest delay setTimeout keeps (a longer one fires at once). */
const MAX_TIMER_MS = 2 ** 31 - 1;
/** Tenants whose latest wake-up is remembered (for wait()'s `mark`). */
const RECENT_WAKES = 10_000;
/** How long a tenant's channel stays subscribed after its last waiter left. */
const UNSUBSCRIBE_AFTER_MS = 30_000;

/** Why a wait ended: a wake-up of its tenant, the re-read tick, the deadline, or the instance stopping. */
export type WaitEnd = "signal" | "tick" | "deadline" | "closing";

interface Waiter {
  tenantId: string;
  wake: (why: WaitEnd) => void;
}

export interface WakeupStats {
  waiters: number;
  wakeups: number;
  refused: number;
}

export class Wakeups {
  private readonly byTenant = new Map<string, Set<Waiter>>();
  private readonly byKey = new Map<string, number>();
  private admitted = 0;
  private closing = false;
  private subscriber?: RedisClient;
  /** Subscribed channels by tenant: true once Redis confirmed the subscription. */
  private readonly channels = new Map<string, boolean>();
  private readonly idle = new Map<string, NodeJS.Timeout>();
  /** The latest wake-up of each recent tenant (bounded): what wait()'s `mark` is compared with. */
  private readonly lastWake = new Map<string, number>();
  private seq = 0;
  readonly stats: WakeupStats = { waiters: 0, wakeups: 0, refused: 0 };

  /** The state each waited-on tenant's feed had at the last probe (server/changes.ts feedState). */
  private readonly probed = new Map<string, string>();
  private probeTimer?: NodeJS.Timeout;
  private probing = false;

  constructor(
    private readonly opts: {
      maxWaiters: number;
      rereadMs: number;
      redis?: RedisClient;
      logger?: Logger;
      /**
       * A tenant's feed state (any string that changes when its feed does). Without it each waiter
       * reads its feed again at every tick itself.
       */
      probe?: (tenantId: string) => Promise<string>;
    },
  ) {}

  /** The subscribed connection (a subscribed client takes no other command), made by the first wait. */
  private subscribed(): RedisClient | undefined {
    if (this.subscriber || !this.opts.redis || this.closing) return this.subscriber;
    // With an offline queue (the service's clients have none): the first SUBSCRIBE, sent while the new
    // connection is still being made, waits for it instead of failing (one per tenant at most).
    const redis = this.opts.redis;
    const sub: RedisClient =
      redis instanceof Cluster
        ? redis.duplicate(undefined, { enableOfflineQueue: true })
        : redis.duplicate({ enableOfflineQueue: true });
    // Its reconnects are ioredis's own; while it is down the re-read tick finds every change.
    sub.on("error", () => {});
    sub.on("message", (channel: string) => this.wakeLocal(channel.slice(wakeupChannel("").length)));
    this.subscriber = sub;
    return sub;
  }

  /** The re-read interval: the longest a change can wait for a waiter that missed every signal. */
  get rereadMs(): number {
    return this.opts.rereadMs;
  }

  /**
   * A place for one waiter of `keyId`, or undefined past the key's or the instance's cap (or while
   * stopping). The caller releases it when its request ends.
   */
  admit(keyId: string): (() => void) | undefined {
    const n = this.byKey.get(keyId) ?? 0;
    if (this.closing || n >= MAX_WAITERS_PER_KEY || this.admitted >= this.opts.maxWaiters) {
      this.stats.refused += 1;
      return undefined;
    }
    this.byKey.set(keyId, n + 1);
    this.admitted += 1;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.admitted -= 1;
      const left = (this.byKey.get(keyId) ?? 1) - 1;
      if (left > 0) this.byKey.set(keyId, left);
      else this.byKey.delete(keyId);
    };
  }

  /**
   * Waits for a wake-up of `tenantId`, the re-read tick or `until` (ms since the epoch), whichever
   * comes first; at once with "closing" while the instance stops; "deadline" when `signal` aborts
   * (a subscriber gone). `mark` (mark(), taken before the waiter read the feed): a wake-up of the
   * tenant since then ends the wait at once, so one that came between the read and the wait is not lost.
   */
  wait(tenantId: string, until: number, signal?: AbortSignal, mark?: number): Promise<WaitEnd> {
    if (this.closing) return Promise.resolve("closing");
    // A wake-up between the waiter's read (its mark) and now: read again at once.
    if (mark !== undefined && (this.lastWake.get(tenantId) ?? 0) > mark) return Promise.resolve("signal");
    const left = until - Date.now();
    if (left <= 0 || signal?.aborted) return Promise.resolve("deadline");
    return new Promise<WaitEnd>((resolve) => {
      // With a probe, the instance's probe ticks for every waiter; the waiter's own timer is its deadline.
      const tick = !this.opts.probe && left > this.opts.rereadMs;
      const onAbort = () => waiter.wake("deadline");
      const waiter: Waiter = {
        tenantId,
        wake: (why) => {
          clearTimeout(timer);
          signal?.removeEventListener("abort", onAbort);
          this.remove(waiter);
          resolve(why);
        },
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      // A deadline past a timer's range (a subscription's) sets none: the waiter waits for a wake-up.
      const delay = tick ? this.opts.rereadMs : left;
      const timer =
        delay <= MAX_TIMER_MS ? setTimeout(() => waiter.wake(tick ? "tick" : "deadline"), delay) : undefined;
      let set = this.byTenant.get(tenantId);
      if (!set) {
        set = new Set();
        this.byTenant.set(tenantId, set);
        this.listen(tenantId);
      }
      set.add(waiter);
      this.stats.waiters += 1;
      if (this.opts.probe && !this.probeTimer)
        this.probeTimer = setInterval(() => void this.probeAll(), this.opts.rereadMs).unref();
    });
  }

  /** The position of the latest wake-up: a waiter takes it before it reads (wait()'s `mark`). */
  mark(): number {
    return this.seq;
  }

  /** After a commit that changed `tenantId`'s objects: its waiters here at once, and through Redis everywhere. */
  notify(tenantId: string): void {
    this.wakeLocal(tenantId);
    const redis = this.opts.redis;
    if (redis && redis.status === "ready") redis.publish(wakeupChannel(tenantId), "1").catch(() => {});
  }

  /** Answers every waiter at once (SIGTERM, close): each answers its request with what it has. */
  close(): void {
    this.closing = true;
    for (const set of [...this.byTenant.values()]) for (const w of [...set]) w.wake("closing");
    for (const t of this.idle.values()) clearTimeout(t);
    this.idle.clear();
    clearInterval(this.probeTimer);
    this.subscriber?.disconnect();
  }

  /**
   * One probe round: each tenant with waiters, one statement each, one at a time (a round that takes
   * longer than the tick delays the next). A tenant seen for the first time wakes its waiters too: a
   * change between a waiter's read and this first look would otherwise go unnoticed.
   */
  private async probeAll(): Promise<void> {
    if (this.probing || this.closing) return;
    this.probing = true;
    try {
      for (const tenantId of [...this.probed.keys()]) if (!this.byTenant.has(tenantId)) this.probed.delete(tenantId);
      for (const tenantId of [...this.byTenant.keys()]) {
        let state: string;
        try {
          state = await this.opts.probe!(tenantId);
        } catch {
          continue; // the database is away: the waiters keep waiting (their deadlines stand)
        }
        if (this.probed.get(tenantId) === state) continue;
        this.probed.set(tenantId, state);
        this.wakeLocal(tenantId);
      }
      if (this.byTenant.size === 0) {
        clearInterval(this.probeTimer);
        this.probeTimer = undefined;
      }
    } finally {
      this.probing = false;
    }
  }

  private wakeLocal(tenantId: string): void {
    this.seq += 1;
    this.lastWake.delete(tenantId);
    this.lastWake.set(tenantId, this.seq);
    // The oldest first (a Map keeps insertion order): bounded, and an entry only matters for milliseconds.
    if (this.lastWake.size > RECENT_WAKES) this.lastWake.delete(this.lastWake.keys().next().value!);
    const set = this.byTenant.get(tenantId);
    if (!set) return;
    for (const w of [...set]) {
      this.stats.wakeups += 1;
      w.wake("signal");
    }
  }

  private remove(w: Waiter): void {
    const set = this.byTenant.get(w.tenantId);
    if (!set?.delete(w)) return;
    this.stats.waiters -= 1;
    if (set.size === 0) {
      this.byTenant.delete(w.tenantId);
      // A waiter goes back to waiting right after each wake-up: the channel stays a while.
      this.idle.set(
        w.tenantId,
        setTimeout(() => {
          this.idle.delete(w.tenantId);
          if (this.byTenant.has(w.tenantId)) return;
          this.channels.delete(w.tenantId);
          this.subscriber?.unsubscribe(wakeupChannel(w.tenantId)).catch(() => {});
        }, UNSUBSCRIBE_AFTER_MS).unref(),
      );
    }
  }

  /** Whether this instance hears `tenantId`'s wake-ups from other instances (its channel subscribed). */
  listening(tenantId: string): boolean {
    return this.channels.get(tenantId) === true;
  }

  private listen(tenantId: string): void {
    clearTimeout(this.idle.get(tenantId));
    this.idle.delete(tenantId);
    const sub = this.subscribed();
    if (!sub || this.channels.has(tenantId)) return;
    this.channels.set(tenantId, false);
    sub.subscribe(wakeupChannel(tenantId)).then(
      () => this.channels.has(tenantId) && this.channels.set(tenantId, true),
      () => this.channels.delete(tenantId),
    );
  }
}
