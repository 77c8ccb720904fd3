import type { OnApplicationShutdown } from '@nestjs/common';
import type { TransportError } from '../common/transport-error';
import { tooManyRequests } from './clients.errors';
import { SlidingWindowStorage } from './sliding-window-storage';

/**
 * What one request of a client learns from the limit: the X-RateLimit-*
 * headers for its answer while under it, the 429 past it (whose envelope
 * carries Retry-After).
 */
export interface RateLimitVerdict {
  headers: Record<string, string>;
  refusal?: TransportError;
}

/**
 * Rate limits per API client, counted in this process's memory: payments keep
 * flowing when Redis is down, and with N API processes a client's ceiling is
 * N times the limit. One budget per client across every route. Taken by
 * ClientThrottlerGuard for the routes Nest serves and by EarlyAnswers for the
 * requests it answers first, so both count against the same window and answer
 * with the same headers (those @nestjs/throttler's guard sent). A 429 is
 * never stored on an idempotency key: the key has not been read yet.
 */
export class ClientRateLimit implements OnApplicationShutdown {
  private readonly storage = new SlidingWindowStorage();

  constructor(
    private readonly limit: number,
    private readonly windowMs: number,
  ) {}

  take(clientId: string): RateLimitVerdict {
    const { totalHits, timeToExpire, isBlocked, timeToBlockExpire } = this.storage.hit(clientId, this.windowMs, this.limit, this.windowMs);
    if (isBlocked) return { headers: {}, refusal: tooManyRequests(timeToBlockExpire) };
    return {
      headers: {
        'X-RateLimit-Limit': String(this.limit),
        'X-RateLimit-Remaining': String(Math.max(0, this.limit - totalHits)),
        'X-RateLimit-Reset': String(timeToExpire),
      },
    };
  }

  onApplicationShutdown(): void {
    this.storage.stop();
  }
}
