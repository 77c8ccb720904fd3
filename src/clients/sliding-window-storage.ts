import type { OnApplicationShutdown } from '@nestjs/common';
import type { ThrottlerStorage } from '@nestjs/throttler';

type ThrottlerStorageRecord = Awaited<ReturnType<ThrottlerStorage['increment']>>;

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
 * @nestjs/throttler's own ThrottlerStorageService (a sliding window of hits;
 * past the limit, blocked for blockDuration, then counted afresh), at a
 * constant cost per request. The stock storage filters and copies every hit
 * still in the window on each request, so a busy client's request costs in
 * proportion to its limit (6,000 timestamps at the default); here expired
 * hits are skipped from the front of a queue, each once.
 *
 * Only the blocking behaviour is kept: the guard always passes a positive
 * blockDuration (the throttler's ttl when none is set, as here).
 * ThrottlerModule provides the instance, so Nest calls its shutdown hook.
 */
export class SlidingWindowStorage implements ThrottlerStorage, OnApplicationShutdown {
  private readonly hits = new Map<string, Hits>();
  private sweep?: NodeJS.Timeout;

  /** `key` already names the throttler (see ClientThrottlerGuard.generateKey). */
  async increment(key: string, ttl: number, limit: number, blockDuration: number): Promise<ThrottlerStorageRecord> {
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

  onApplicationShutdown(): void {
    clearInterval(this.sweep);
    this.hits.clear();
  }

  private record(entry: Hits, timeToExpire: number, timeToBlockExpire: number): ThrottlerStorageRecord {
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
