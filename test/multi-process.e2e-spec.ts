import { randomUUID } from 'node:crypto';
import { Queue } from 'bullmq';
import type { DataSource } from 'typeorm';
import { seedStaleBacklog } from '../scripts/bench/backlog';
import type { WorkerProcess } from './support/processes';
import { RECONCILIATION_QUEUE } from '../src/reconciliation/reconciliation.constants';
import { eventually } from './support/eventually';
import { crashPointReached, logged, useProcessStack } from './support/process-stack';
import { testConfig } from './support/test-env';

/**
 * Two API processes and two workers on one Postgres and one Redis, as a
 * deployment runs them: whichever process a request or a job lands on, a
 * payment is made once, charged once, and reconciled by one worker at a time.
 */
jest.setTimeout(30_000);

const payload = (paymentMethod = 'pm_card_ok') => ({ amount: 990, currency: 'USD', payment_method: paymentMethod });

describe('several API and worker processes on one database and one Redis', () => {
  const stack = useProcessStack({
    // Latency keeps concurrent requests overlapping; pending charges settle after a few reconciliation rounds.
    providerEnv: { PROVIDER_LATENCY_MS: '150', PROVIDER_PENDING_SETTLE_MS: '1000' },
    apis: 2,
    client: 'multi-process shop',
  });

  it('turns concurrent requests on one key, spread over both APIs, into one payment and one charge', async () => {
    const key = randomUUID();
    const replies = await Promise.all(Array.from({ length: 24 }, (_, i) => stack.clients[i % 2].post(key, payload())));

    const created = replies.filter((reply) => reply.status === 201);
    const original = created.filter((reply) => reply.headers.get('idempotent-replayed') === null);
    expect(original).toHaveLength(1);
    for (const reply of replies) {
      if (reply.status === 409) expect(reply.body.error?.code).toBe('idempotency_key_in_use');
      else expect(reply.text).toBe(original[0].text);
    }
    expect(replies.filter((reply) => reply.status !== 201 && reply.status !== 409)).toEqual([]);
    const paymentId = original[0].body.id!;
    expect(await stack.db.query('SELECT id FROM payments')).toEqual([{ id: paymentId }]);
    expect(await stack.provider.chargesFor(paymentId)).toHaveLength(1);
  });

  it('runs one sweep schedule across both workers, and reconciles each payment one attempt at a time', async () => {
    const workers = await Promise.all([stack.startWorker(), stack.startWorker()]);
    try {
      const replies = await Promise.all(
        Array.from({ length: 8 }, (_, i) => stack.clients[i % 2].post(randomUUID(), payload('pm_card_pending'))),
      );
      expect(replies.map((reply) => reply.status)).toEqual(Array(8).fill(202));
      const ids = replies.map((reply) => reply.body.id!);

      await nothingPending(stack.db);

      expect(await schedulerIds()).toEqual(['prune-idempotency-keys', 'reconcile-sweep']);
      const rows = (await stack.db.query('SELECT id, status, reconcile_attempts FROM payments')) as {
        id: string;
        status: string;
        reconcile_attempts: number;
      }[];
      const workerLines = workers.flatMap((worker) => worker.output());
      for (const { id, status, reconcile_attempts: attempts } of rows) {
        expect(status).toBe('succeeded');
        expect(await stack.provider.chargesFor(id)).toHaveLength(1);
        // The request called the provider once, then each attempt once, the
        // last one (which settled it) uncounted: a second worker on the same
        // payment would add a call that no attempt counted.
        expect({ id, calls: providerCalls(id) }).toEqual({ id, calls: 1 + attempts + 1 });
        expect(workerLines.filter((line) => line.includes('"payment reconciled"') && line.includes(id))).toHaveLength(1);
      }
      expect(rows.map((row) => row.id).sort()).toEqual([...ids].sort());
    } finally {
      await Promise.all(workers.map((worker) => worker.stop()));
    }
  });

  it('finishes the payment of a worker killed mid-job on another worker', async () => {
    const crashing = await stack.startWorker({ CRASH_POINT: 'worker_mid_job' });
    let survivor: WorkerProcess | undefined;
    try {
      const key = randomUUID();
      const pending = await stack.clients[0].post(key, payload('pm_card_pending'));
      const paymentId = await crashPointReached(crashing, 'worker_mid_job');
      expect(await crashing.exited).toEqual({ code: null, signal: 'SIGKILL' });
      expect(paymentId).toBe(pending.body.id);

      survivor = await stack.startWorker();
      await survivor.waitForLine(logged('payment reconciled', paymentId), 15_000);
      const late = await stack.clients[1].post(key, payload('pm_card_pending'));

      expect(late.status).toBe(201);
      expect(late.headers.get('idempotent-replayed')).toBe('true');
      expect(late.body).toMatchObject({ id: paymentId, status: 'succeeded' });
      expect(await stack.provider.chargesFor(paymentId)).toHaveLength(1);
      expect(await survivor.stop()).toEqual({ code: 0, signal: null });
    } finally {
      await survivor?.stop();
    }
  });

  /** Calls about one payment the provider logged: POST /charges under its provider key, GET /charges/<provider key>. */
  function providerCalls(paymentId: string): number {
    const providerKey = `pk_${paymentId}`;
    return stack.provider
      .output()
      .filter((text) => text.startsWith('{'))
      .map((text) => JSON.parse(text) as { req?: { method?: string; url?: string; headers?: Record<string, string> } })
      .filter(
        ({ req }) =>
          (req?.method === 'POST' && req.url === '/charges' && req.headers?.['idempotency-key'] === providerKey) ||
          (req?.method === 'GET' && req.url === `/charges/${providerKey}`),
      ).length;
  }

  async function schedulerIds(): Promise<string[]> {
    const queue = new Queue(RECONCILIATION_QUEUE, { connection: { url: testConfig().redisUrl }, prefix: stack.queuePrefix });
    try {
      return (await queue.getJobSchedulers()).map((scheduler) => scheduler.key).sort();
    } finally {
      await queue.close();
    }
  }
});

describe('the reconciliation rate limit', () => {
  const stack = useProcessStack({ client: 'rate-limited shop' });

  it('holds both workers together to RECONCILE_RATE_LIMIT payments a second', async () => {
    // 160 stale payments are eight jobs of 20; at 50 payments/s together the
    // queue starts one every 400 ms, so the last job commits about 2.8 s after
    // the first, less the first job's extra time on cold connections (over
    // half a second on a loaded machine). Unlimited, the sixteen slots of the
    // two workers take all eight at once and they commit within tens of
    // milliseconds.
    const [{ id: clientId }] = (await stack.db.query('SELECT id FROM api_clients')) as { id: string }[];
    await seedStaleBacklog(stack.db, clientId, 160);
    const limited = { RECONCILE_RATE_LIMIT: '50', RECONCILE_INTERVAL_MS: '1000' };
    const workers = await Promise.all([stack.startWorker(limited), stack.startWorker(limited)]);
    try {
      await nothingPending(stack.db, 20_000);
      const [{ statuses, spreadMs }] = (await stack.db.query(
        `SELECT array_agg(DISTINCT status) AS statuses,
                (extract(epoch FROM max(updated_at) - min(updated_at)) * 1000)::int AS "spreadMs"
           FROM payments`,
      )) as { statuses: string[]; spreadMs: number }[];

      expect(statuses).toEqual(['succeeded']);
      expect(spreadMs).toBeGreaterThanOrEqual(1_400);
      expect(await stack.provider.chargesFor('pay_backlog_1')).toHaveLength(1);
      expect(await stack.provider.chargesFor('pay_backlog_160')).toHaveLength(1);
    } finally {
      await Promise.all(workers.map((worker) => worker.stop()));
    }
  });
});

/** Polls until no payment is pending: every one reconciled. */
async function nothingPending(db: DataSource, timeoutMs?: number): Promise<void> {
  await eventually(
    async () => {
      const [{ pending }] = (await db.query(`SELECT count(*)::int AS pending FROM payments WHERE status = 'pending'`)) as { pending: number }[];
      return pending === 0 ? true : undefined;
    },
    { what: 'every payment to be reconciled', ...(timeoutMs !== undefined && { timeoutMs }) },
  );
}
