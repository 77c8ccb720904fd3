/** What a hit learns: the same fields as @nestjs/throttler's storage record. */
export interface WindowRecord {
  totalHits: number;
  /** Whole seconds until the window X-RateLimit-Reset counts down to ends. */
  timeToExpire: number;
  isBlocked: boolean;
  /** Whole seconds the block has left: at least 1 while blocked, 0 when not. */
  timeToBlockExpire: number;
}

/** How often keys with nothing left to count are forgotten, as the stock storage does. */
const SWEEP_INTERVAL_MS = 60_000;

interface Hits {
  /** When each counted hit leaves the window, oldest first; those before `first` have left. */
  expiries: number[];
  first: number;
  /** End of the window X-RateLimit-Reset counts down to; a new one starts when it has passed. */
  windowEndsAt: number;
  /** 0 when not blocked. */
  blockedUntil: number;
}

/**
 * The rate limit's counts, in this process's memory: the answers of
 * @nestjs/throttler's ThrottlerStorageService (a sliding window of hits;
 * past the limit, blocked for blockDuration, then counted afresh), at a
 * constant cost per request. The stock storage filters and copies every hit
 * still in the window on each request, so a busy client's request costs in
 * proportion to its limit (6,000 timestamps at the default); here expired
 * hits are skipped from the front of a queue, each once.
 *
 * Synchronous, so that a request answered before Nest (EarlyAnswers) counts
 * against the same window without waiting a tick. Only the blocking
 * behaviour is kept: blockDuration is always positive (ClientRateLimit passes
 * the window).
 */
export class SlidingWindowStorage {
  private readonly hits = new Map<string, Hits>();
  private sweep?: NodeJS.Timeout;

  hit(key: string, ttl: number, limit: number, blockDuration: number): WindowRecord {
    this.sweep ??= setInterval(() => this.forgetIdle(), SWEEP_INTERVAL_MS).unref();
    const now = Date.now();
    let entry = this.hits.get(key);
    if (!entry) {
      entry = { expiries: [], first: 0, windowEndsAt: now + ttl, blockedUntil: 0 };
      this.hits.set(key, entry);
    }
    while (entry.first < entry.expiries.length && entry.expiries[entry.first] <= now) entry.first++;
    // Drop the skipped front once it is most of the array, so memory follows the live hits.
    if (entry.first > 64 && entry.first * 2 > entry.expiries.length) {
      entry.expiries = entry.expiries.slice(entry.first);
      entry.first = 0;
    }
    if (entry.windowEndsAt <= now) entry.windowEndsAt = now + ttl;
    const timeToExpire = Math.ceil((entry.windowEndsAt - now) / 1000);

    if (entry.blockedUntil > now) {
      return this.record(entry, timeToExpire, Math.ceil((entry.blockedUntil - now) / 1000));
    }
    if (entry.blockedUntil !== 0) {
      // The block is over: the client starts with an empty window.
      entry.expiries = [];
      entry.first = 0;
      entry.blockedUntil = 0;
    }
    entry.expiries.push(now + ttl);
    if (entry.expiries.length - entry.first > limit) entry.blockedUntil = now + blockDuration;
    return this.record(entry, timeToExpire, entry.blockedUntil === 0 ? 0 : Math.ceil(blockDuration / 1000));
  }

  stop(): void {
    clearInterval(this.sweep);
    this.hits.clear();
  }

  private record(entry: Hits, timeToExpire: number, timeToBlockExpire: number): WindowRecord {
    return {
      totalHits: entry.expiries.length - entry.first,
      timeToExpire,
      isBlocked: entry.blockedUntil !== 0,
      timeToBlockExpire,
    };
  }

  private forgetIdle(now = Date.now()): void {
    for (const [key, entry] of this.hits) {
      const lastExpiry = entry.expiries[entry.expiries.length - 1] ?? 0;
      if (entry.blockedUntil <= now && lastExpiry <= now && entry.windowEndsAt <= now) this.hits.delete(key);
    }
  }
}
