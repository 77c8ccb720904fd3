import { Logger } from '@nestjs/common';
import { Redis } from 'ioredis';
import { errorForLog } from '../common/log-safety';

const logger = new Logger('HealthRedis');

/**
 * A Redis connection that fails fast instead of queueing commands while Redis
 * is away: readiness must say "down" at once, not hang. Its errors are logged
 * as structured lines, once when the connection is lost and once when it is
 * back, not on every reconnection attempt (without a listener, ioredis prints
 * an unstructured "Unhandled error event" for each).
 */
export function createFailFastRedis(url: string): Redis {
  const redis = new Redis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: 2_000,
    lazyConnect: false,
  });
  let down = false;
  redis.on('error', (error: unknown) => {
    if (down) return;
    down = true;
    logger.warn({ msg: 'redis unreachable; readiness says down until it is back', err: errorForLog(error) });
  });
  redis.on('ready', () => {
    if (!down) return;
    down = false;
    logger.log({ msg: 'redis reachable again' });
  });
  return redis;
}
