// The negative cache of the key lookup: a key prefix that no key has, remembered for a few seconds,
// so that a flood of made-up keys (random, or one guessed key repeated) costs no database round trip
// per request. Only "no key has this prefix" is remembered: a known prefix (a revoked or expired key,
// a wrong secret, a plan without API access) is looked up on every request, so a revocation, a plan
// change or an expiry still applies on the very next one. A key created while its prefix is
// remembered would be refused until the entry expires; prefixes are 12 random base62 characters
// (server/auth/keys.ts), so that needs a client to have presented the new key's prefix beforehand.
// Bounded: at most `capacity` prefixes, the oldest dropped first.

/** How long an unknown prefix is remembered (ms). */
export const UNKNOWN_PREFIX_TTL_MS = 5_000;
/** Most prefixes remembered at once (~16 bytes each, with the Map's own overhead well under 2 MB). */
export const UNKNOWN_PREFIX_CAPACITY = 10_000;

export class UnknownPrefixes {
  /** prefix → when it stops being remembered; insertion order is expiry order (one TTL for all). */
  private readonly until = new Map<string, number>();

  constructor(
    private readonly now: () => number = () => performance.now(),
    readonly ttlMs = UNKNOWN_PREFIX_TTL_MS,
    readonly capacity = UNKNOWN_PREFIX_CAPACITY,
  ) {}

  /** Whether `prefix` was found to be no key's within the last ttlMs. */
  has(prefix: string): boolean {
    const until = this.until.get(prefix);
    if (until === undefined) return false;
    if (until > this.now()) return true;
    this.until.delete(prefix);
    return false;
  }

  /** Remembers that no key has `prefix` (now). */
  add(prefix: string): void {
    const now = this.now();
    this.until.delete(prefix); // re-added at the end: the Map stays in expiry order
    // Expired entries first, then (still full) the oldest: both at the front of the Map.
    for (const [p, until] of this.until) {
      if (until > now && this.until.size < this.capacity) break;
      this.until.delete(p);
    }
    this.until.set(prefix, now + this.ttlMs);
  }

  /** How many prefixes are remembered (expired ones not yet dropped included). */
  get size(): number {
    return this.until.size;
  }
}
