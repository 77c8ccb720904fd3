import { Queue } from 'bullmq';
import { WEBHOOKS_QUEUE } from '../../src/merchant-events/webhooks.constants';
import { RECONCILIATION_QUEUE } from '../../src/reconciliation/reconciliation.constants';
import { RETENTION_QUEUE } from '../../src/retention/retention.constants';

/** Every BullMQ queue the worker uses. */
const WORKER_QUEUES = [RECONCILIATION_QUEUE, WEBHOOKS_QUEUE, RETENTION_QUEUE];

/**
 * Removes every BullMQ key of the worker's queues under `prefix`, job
 * schedulers included: for a run or a test that owns its prefix, so nobody
 * else's keys.
 */
export async function dropWorkerQueues(redisUrl: string, prefix: string): Promise<void> {
  for (const name of WORKER_QUEUES) {
    const queue = new Queue(name, { connection: { url: redisUrl }, prefix });
    try {
      await queue.obliterate({ force: true });
    } finally {
      await queue.close();
    }
  }
}
