import type { ConnectionOptions } from 'bullmq';
import { Cluster, type ClusterOptions, Redis, type RedisOptions } from 'ioredis';
import type { AppConfig } from '../config/app-config';

type RedisTarget = Pick<AppConfig, 'redisUrl' | 'redisClusterNodes'>;

/**
 * Redis as the configuration names it: the one server of REDIS_URL, or the
 * cluster seeded by REDIS_CLUSTER_NODES. `options` are per connection (each
 * node's, on a cluster); `cluster` applies to a cluster only.
 */
export function createRedisClient(
  target: RedisTarget,
  options: RedisOptions,
  cluster: Omit<ClusterOptions, 'redisOptions'> = {},
): Redis | Cluster {
  if (target.redisClusterNodes === undefined) return new Redis(target.redisUrl, options);
  // A failover moves the primary of the queues' slot; ioredis follows the
  // MOVED answers and the refreshed slot map to the promoted replica.
  //
  // No ready check: ioredis 5.11 (and 6.0) checks CLUSTER INFO after each
  // connect and, while a failover is under way (cluster_state:fail), tears the
  // connection down to try again without ever settling the promise connect()
  // returned. BullMQ reconnects a worker's blocking connection after a failed
  // fetch and awaits that promise, so the worker stopped taking jobs for good
  // (in about half the failovers of the Redis Cluster scale spec). Without the
  // check, connect() settles once the slot map is read; a command sent while
  // the cluster is still down fails with CLUSTERDOWN and is tried again.
  return new Cluster(target.redisClusterNodes, {
    ...cluster,
    redisOptions: options,
    slotsRefreshInterval: 1_000,
    enableReadyCheck: false,
  });
}

/**
 * The `connection` of a BullMQ queue or worker. BullMQ connects to a single
 * server from options, and duplicates what it needs; a cluster it only takes as
 * a client instance. It leaves a client it was given open: the process's exit
 * closes it.
 */
export function bullConnection(target: RedisTarget, options: RedisOptions = {}): ConnectionOptions {
  if (target.redisClusterNodes === undefined) return { url: target.redisUrl, ...options } as ConnectionOptions;
  return createRedisClient(target, options);
}

/**
 * How long a BullMQ worker waits after a failed fetch (Redis away, a cluster
 * failing over) before it fetches again. BullMQ's default is 15 s, which a
 * SIGTERM also waits out: a second resumes the work about when Redis is back,
 * for one logged error a second while it is away.
 */
export const WORKER_RETRY_DELAY_MS = 1_000;
