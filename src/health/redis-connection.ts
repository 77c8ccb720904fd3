import { Redis } from 'ioredis';

/**
 * A Redis connection that fails fast instead of queueing commands while Redis
 * is away: readiness must say "down" at once, not hang.
 */
export function createFailFastRedis(url: string): Redis {
  return new Redis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: 2_000,
    lazyConnect: false,
  });
}
