import { Logger } from '@nestjs/common';
import type { Cluster, Redis } from 'ioredis';
import type { AppConfig } from '../config/app-config';
import { errorForLog } from '../common/log-safety';
import { createRedisClient } from '../common/redis-client';

const logger = new Logger('HealthRedis');

/**
 * A Redis connection that fails fast instead of queueing commands while Redis
 * is away: readiness must say "down" at once, not hang. Its errors are logged
 * as structured lines, once when the connection is lost and once when it is
 * back, not on every reconnection attempt (without a listener, ioredis prints
 * an unstructured "Unhandled error event" for each).
 */
export function createFailFastRedis(target: Pick<AppConfig, 'redisUrl' | 'redisClusterNodes'>): Redis | Cluster {
  const redis = createRedisClient(
    target,
    { enableOfflineQueue: false, maxRetriesPerRequest: 1, connectTimeout: 2_000, lazyConnect: false },
    { enableOfflineQueue: false },
  );
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
