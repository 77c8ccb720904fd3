import { randomUUID } from 'node:crypto';
import { Queue } from 'bullmq';
import { runAudit } from '../../scripts/audit';
import { type PrivateRedisCluster, startPrivateRedisCluster } from '../support/private-redis-cluster';
import { isHealthy } from '../support/processes';
import { bullConnection } from '../../src/common/redis-client';
import { loadConfig } from '../../src/config/app-config';
import { RECONCILIATION_QUEUE } from '../../src/reconciliation/reconciliation.constants';
import { eventually } from '../support/eventually';
import { TEST_DATABASE_URL, uniqueQueuePrefix } from '../support/test-env';
import { ScaleStack, answer, payment } from './scale-stack';

/**
 * The workers' queues and the API's readiness check on a private Redis
 * Cluster (three primaries, a replica each). Payments that only
 * reconciliation can finish are made before and while the primary holding
 * the queues' slot is SIGKILLed; its replica takes over, and every payment
 * still ends final with one charge and every event delivered: Postgres holds
 * the work, Redis only its schedule.
 */
jest.setTimeout(180_000);

const PAYMENTS_PER_WAVE = 10;

describe('the workers on a Redis Cluster that loses a primary', () => {
  let cluster: PrivateRedisCluster;
  const stack = new ScaleStack();
  const prefix = uniqueQueuePrefix();
  /** The hash tag every key of the queues carries, so the slot they all live in. */
  const hashTag = `{${prefix}}`;

  beforeAll(async () => {
    cluster = await startPrivateRedisCluster();
    await stack.start({
      // One provider attempt, which pm_card_timeout outlasts: the API answers
      // 202 and only a worker's reconciliation can finish the payment.
      // Half of each wave times out on purpose, which the client's circuit
      // breaker would count towards opening (ratio 0.5) and then answer 503.
      env: {
        DATABASE_URL: TEST_DATABASE_URL,
        REDIS_CLUSTER_NODES: cluster.nodesEnv,
        QUEUE_PREFIX: prefix,
        PROVIDER_MAX_ATTEMPTS: '1',
        PROVIDER_BREAKER_FAILURE_RATIO: '0.9',
      },
      providerEnv: { PROVIDER_SLOW_REPLY_MS: '1200', PROVIDER_PENDING_SETTLE_MS: '2000' },
      apis: 1,
      workers: 2,
    });
  });
  afterAll(async () => {
    await stack.stop();
    await cluster?.stop();
  });

  const wave = () =>
    Promise.all(
      Array.from({ length: PAYMENTS_PER_WAVE }, (_, i) =>
        stack.clients[0].post(randomUUID(), payment(i % 2 === 0 ? 'pm_card_pending' : 'pm_card_timeout', 3_000 + i)),
      ),
    );

  it('finishes every payment with one charge and delivers every event after a failover', async () => {
    const config = loadConfig({ ...process.env, ...stack.env });
    expect(config.queuePrefix).toBe(hashTag);
    const before = await wave();
    expect(before.map(answer)).toEqual(Array(PAYMENTS_PER_WAVE).fill('202'));

    const primary = await cluster.primaryFor(hashTag);
    await cluster.kill(primary);
    // Made while the queues' slot has no primary: the API needs Postgres only.
    const during = await wave();
    expect(during.map(answer)).toEqual(Array(PAYMENTS_PER_WAVE).fill('202'));
    const promoted = await cluster.failedOver(hashTag, primary, 30_000);
    expect(promoted).not.toBe(primary);

    await stack.settled(60_000);
    const ledger = await stack.ledger();
    expect(ledger).toHaveLength(2 * PAYMENTS_PER_WAVE);
    expect(ledger.filter((row) => row.status !== 'succeeded' || row.charges !== 1)).toEqual([]);
    const events = await stack.eventsDelivered(60_000);
    expect(events).toHaveLength(ledger.length);

    // The schedulers live on the cluster, under the hash tag, and survived the failover.
    const connection = bullConnection(config, { maxRetriesPerRequest: 1 });
    const queue = new Queue(RECONCILIATION_QUEUE, { connection, prefix: config.queuePrefix });
    try {
      expect((await queue.getJobSchedulers()).map((scheduler) => scheduler.key).sort()).toEqual([
        'prune-idempotency-keys',
        'reconcile-sweep',
      ]);
    } finally {
      await queue.close();
      (connection as { disconnect(): void }).disconnect();
    }
    await eventually(async () => ((await isHealthy(`${stack.apis[0].url}/health/ready`)) ? true : undefined), {
      timeoutMs: 10_000,
      what: 'the API to be ready on the cluster again',
    });
    expect(await runAudit(config)).toMatchObject({ ok: true });
    for (const worker of stack.workers) expect(await worker.stop()).toEqual({ code: 0, signal: null });
  });
});
