import { randomUUID } from 'node:crypto';
import { setTimeout } from 'node:timers/promises';
import { eventually } from './support/eventually';
import { PaymentsClient, type Reply, useProcessStack } from './support/process-stack';
import type { ManagedProcess } from './support/processes';
import { createClient } from './support/test-env';

/**
 * The metrics an operator watches the safety net with (issue 29), read over
 * HTTP from the real processes: the worker's database-wide gauges and its
 * reconcile outcomes, and the API's idempotency conflicts.
 */

jest.setTimeout(90_000);

/** A payment the provider keeps pending (PROVIDER_PENDING_SETTLE_MS below is longer than the file runs). */
const PENDING = { amount: 500, currency: 'USD', payment_method: 'pm_card_pending' };
/** The provider answers 503 to every call: the outcome stays unknown. */
const UNAVAILABLE = { amount: 700, currency: 'USD', payment_method: 'pm_card_unavailable' };
const OK = { amount: 300, currency: 'USD', payment_method: 'pm_card_ok' };
/** An endpoint that refuses every connection: its delivery stays pending, retried later. */
const DEAD_ENDPOINT = 'http://127.0.0.1:9/hooks';

/**
 * The one sample of `name` with exactly `labels` in a Prometheus text
 * exposition, or undefined when the series is absent.
 */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  const wanted = Object.entries(labels)
    .map(([label, value]) => `${label}="${value}"`)
    .sort()
    .join(',');
  for (const line of text.split('\n')) {
    const match = /^([a-z_:]+)(?:\{([^}]*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const found = (match[2] ?? '').split(',').filter(Boolean).sort().join(',');
    if (found === wanted) return Number(match[3]);
  }
  return undefined;
}

/** GET /metrics of a worker, on the free port it logged it serves them on. */
async function workerMetrics(worker: ManagedProcess): Promise<string> {
  const { json } = await worker.waitForLine(({ json }) => json?.msg === 'metrics served');
  return (await fetch(`http://127.0.0.1:${json!.port as number}/metrics`)).text();
}

describe('the safety-net metrics', () => {
  const stack = useProcessStack({
    client: 'observability',
    apis: 2,
    providerEnv: { PROVIDER_PENDING_SETTLE_MS: '600000' },
  });
  const workers: ManagedProcess[] = [];
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((worker) => worker.stop()));
  });

  async function startWorker(env: Record<string, string>): Promise<ManagedProcess> {
    const worker = await stack.startWorker({ METRICS_GAUGE_INTERVAL_MS: '100', ...env });
    workers.push(worker);
    return worker;
  }

  it('show payments and refunds pending, then in review, and deliveries pending, the same on every worker', async () => {
    // A worker with a long ladder: pending payments are postponed again and again, never sent to review.
    const patient = await startWorker({ RECONCILE_MAX_ATTEMPTS: '1000' });
    const hooked = await createClient(stack.db, 'observability-hooks', { webhookUrl: DEAD_ENDPOINT });
    expect((await new PaymentsClient(stack.api.url, hooked.apiKey).post(randomUUID(), OK)).status).toBe(201);
    for (const body of [PENDING, PENDING, UNAVAILABLE]) {
      expect((await stack.client.post(randomUUID(), body)).status).toBe(202);
    }
    // A refund the provider holds as pending (it settles in ten minutes).
    const refunded = await stack.client.post(randomUUID(), { ...OK, payment_method: 'pm_card_refund_pending' });
    expect((await stack.client.refund(randomUUID(), { payment: refunded.body.id, amount: 100 })).status).toBe(202);

    const pendingSeen = await eventually(
      async () => {
        const text = await workerMetrics(patient);
        const seen = {
          pending: sample(text, 'payments_pending'),
          review: sample(text, 'payments_requires_review'),
          refundsPending: sample(text, 'refunds_pending'),
          refundsReview: sample(text, 'refunds_requires_review'),
          deliveries: sample(text, 'webhook_deliveries_pending'),
          postponed: sample(text, 'reconcile_outcomes_total', { outcome: 'postponed' }),
        };
        return seen.pending === 3 && seen.review === 0 && seen.refundsPending === 1 && seen.refundsReview === 0 &&
          seen.deliveries === 1 && seen.postponed! > 0
          ? text
          : undefined;
      },
      { timeoutMs: 30_000, what: 'the patient worker to report 3 pending payments, 1 pending refund, 1 pending delivery, postponements' },
    );
    expect(sample(pendingSeen, 'payments_oldest_pending_age_seconds')).toBeGreaterThan(0);
    expect(sample(pendingSeen, 'webhook_oldest_pending_age_seconds')).toBeGreaterThan(0);
    for (const queue of ['reconciliation', 'webhooks']) {
      for (const state of ['waiting', 'active', 'delayed', 'failed', 'prioritized']) {
        expect(sample(pendingSeen, 'queue_jobs', { queue, state })).toBeGreaterThanOrEqual(0);
      }
    }

    // A second worker on a one-rung ladder sends every payment it reconciles to review.
    const hasty = await startWorker({ RECONCILE_MAX_ATTEMPTS: '1' });
    for (const worker of [hasty, patient]) {
      await eventually(
        async () => {
          const text = await workerMetrics(worker);
          const settledOnReview =
            sample(text, 'payments_pending') === 0 &&
            sample(text, 'payments_requires_review') === 3 &&
            sample(text, 'refunds_pending') === 0 &&
            sample(text, 'refunds_requires_review') === 1 &&
            sample(text, 'payments_oldest_pending_age_seconds') === 0 &&
            sample(text, 'webhook_deliveries_pending') === 1;
          return settledOnReview ? true : undefined;
        },
        { timeoutMs: 30_000, what: 'every worker to report the 3 payments and the refund in review and none pending' },
      );
    }
    expect(sample(await workerMetrics(hasty), 'reconcile_outcomes_total', { outcome: 'requires_review' })).toBe(4);
    expect(sample(await workerMetrics(patient), 'reconcile_outcomes_total', { outcome: 'requires_review' })).toBe(0);

    // The gauges' timer holds no worker up: SIGTERM stops each cleanly, well within its grace.
    for (const worker of workers.splice(0)) {
      expect(await worker.stop()).toEqual({ code: 0, signal: null });
      expect(worker.output().join('\n')).not.toContain('shutdown outlasted its grace');
    }
  });

  it('count every idempotency conflict the APIs answer, from the answer cache, the database and a key in use', async () => {
    const conflicts = async (code: string) => {
      let total = 0;
      for (const api of stack.apis) {
        const text = await (await fetch(`${api.metricsUrl}/metrics`)).text();
        total += sample(text, 'idempotency_conflicts_total', { code }) ?? 0;
      }
      return total;
    };
    const [first, second] = stack.clients;
    const before = { inUse: await conflicts('idempotency_key_in_use'), reused: await conflicts('idempotency_key_reused') };

    const key = randomUUID();
    expect((await first.post(key, OK)).status).toBe(201);
    // The first API holds the key's answer in its cache; the second reads the key from Postgres.
    expect((await first.post(key, { ...OK, amount: 301 })).status).toBe(422);
    expect((await second.post(key, { ...OK, amount: 302 })).status).toBe(422);

    // A charge the provider answers late holds its key for the provider deadline: a retry meanwhile is a 409.
    // Whichever request claims the key first holds it (the first retry may beat the first request to
    // it), and the other gets the 409; a holder is not waited for, since it waits on the provider.
    const held = randomUUID();
    const slow = { amount: 900, currency: 'USD', payment_method: 'pm_card_timeout' };
    const statuses: number[] = [];
    const send = (client: PaymentsClient) => {
      const reply = client.post(held, slow);
      void reply.then(({ status }) => statuses.push(status), () => undefined);
      return reply;
    };
    const replies: Promise<Reply>[] = [send(first)];
    await eventually(
      async () => {
        if (!statuses.includes(409)) {
          const retry = send(second);
          replies.push(retry);
          await Promise.race([retry, setTimeout(100)]);
        }
        return statuses.includes(409) ? true : undefined;
      },
      { timeoutMs: 10_000, intervalMs: 20, what: 'a 409 for the key in use' },
    ).catch((error: Error) => {
      throw new Error(`${error.message}; answers so far: ${statuses.join(', ') || 'none'}`);
    });
    const answered409 = (await Promise.all(replies)).filter(({ status }) => status === 409).length;

    expect(await conflicts('idempotency_key_reused')).toBe(before.reused + 2);
    expect(await conflicts('idempotency_key_in_use')).toBe(before.inUse + answered409);
  });
});
