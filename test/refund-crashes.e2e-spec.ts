import { randomUUID } from 'node:crypto';
import type { CrashPointName } from '../src/config/app-config';
import { eventually } from './support/eventually';
import { type Reply, crashPointReached, useProcessStack } from './support/process-stack';

/**
 * Every crash window of a payment, for a refund too: the API process dies
 * (SIGKILL) after the claim, during the provider call or before the outcome,
 * or the worker dies mid-job, and the refund still ends final, refunded once
 * by the provider under its own key, with its answer stored on the key. The
 * API, the worker and the mock provider are real processes.
 */
jest.setTimeout(45_000);

type ApiCrashPoint = Exclude<CrashPointName, 'worker_mid_job' | 'worker_mid_delivery'>;

/** Where each point leaves the provider: whether it holds the refund by the time recovery starts. */
const API_CRASH_POINTS: [ApiCrashPoint, { refunded: boolean }][] = [
  ['after_claim', { refunded: false }],
  ['during_provider_call', { refunded: true }],
  ['before_outcome', { refunded: true }],
];

describe('refunds whose API process or worker dies', () => {
  const stack = useProcessStack({
    providerEnv: { PROVIDER_LATENCY_MS: '300', PROVIDER_PENDING_SETTLE_MS: '1000' },
    client: 'refund crash shop',
  });

  /** A payment of 1000 that succeeded, made through the healthy API. */
  async function paid(paymentMethod = 'pm_card_ok'): Promise<string> {
    const reply = await stack.client.post(randomUUID(), { amount: 1000, currency: 'EUR', payment_method: paymentMethod });
    expect(reply.status).toBe(201);
    return reply.body.id!;
  }

  async function stateOf(refundId: string) {
    const [row] = (await stack.db.query(
      `SELECT r.status, k.response_body IS NOT NULL AS stored
         FROM refunds r JOIN idempotency_keys k ON k.refund_id = r.id
        WHERE r.id = $1`,
      [refundId],
    )) as { status: string; stored: boolean }[];
    return row;
  }

  /** One provider refund, under the refund's own key, and it is the one the answer names. */
  async function expectRefundedOnce(refundId: string, answer: Reply, paymentId: string) {
    const refunds = await stack.provider.refundsFor(refundId);
    expect(refunds).toHaveLength(1);
    expect(refunds[0]).toMatchObject({ idempotency_key: `rk_${refundId}`, status: 'succeeded', amount: 400 });
    expect((answer.body as { provider_refund_id?: string }).provider_refund_id).toBe(refunds[0].id);
    expect(await stack.db.query('SELECT id FROM refunds')).toEqual([{ id: refundId }]);
    const [sums] = (await stack.db.query('SELECT amount_reserved, amount_refunded FROM payments WHERE id = $1', [
      paymentId,
    ])) as { amount_reserved: number; amount_refunded: number }[];
    expect(sums).toEqual({ amount_reserved: 400, amount_refunded: 400 });
  }

  /** Retries until the dead request's lease has expired and the retry gets a final answer. */
  const retryUntilFinal = (key: string, body: object) =>
    eventually(
      async () => {
        const reply = await stack.client.refund(key, body);
        return reply.status === 409 || reply.status === 202 ? undefined : reply;
      },
      { what: 'a final answer to the refund retry' },
    );

  it.each(API_CRASH_POINTS)('API killed at %s: the retry resumes the same refund', async (point, { refunded }) => {
    const paymentId = await paid();
    const crashing = await stack.startApi({ CRASH_POINT: point });
    const key = randomUUID();
    const body = { payment: paymentId, amount: 400 };
    const answer = stack.clientOf(crashing).refund(key, body).then(
      () => 'answered',
      () => 'no answer',
    );
    const refundId = await crashPointReached(crashing, point);

    expect(refundId).toMatch(/^re_/);
    expect(await crashing.exited).toEqual({ code: null, signal: 'SIGKILL' });
    expect(await answer).toBe('no answer');
    expect(await stateOf(refundId)).toEqual({ status: 'pending', stored: false });
    if (refunded) {
      await eventually(async () => ((await stack.provider.refundsFor(refundId)).length === 1 ? true : undefined), {
        what: 'the provider to record the refund of the dead request',
      });
    } else {
      expect(await stack.provider.refundsFor(refundId)).toEqual([]);
    }

    const resumed = await retryUntilFinal(key, body);

    expect(resumed.status).toBe(201);
    expect(resumed.body).toMatchObject({ id: refundId, status: 'succeeded' });
    await stack.api.waitForLine(({ json }) => json?.msg === 'resuming refund' && json.refundId === refundId);
    await expectRefundedOnce(refundId, resumed, paymentId);
    const replay = await stack.client.refund(key, body);
    expect(replay.text).toBe(resumed.text);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
  });

  it('API killed during the provider call, the client gone: the worker finishes the refund, a late retry replays it', async () => {
    const paymentId = await paid();
    const crashing = await stack.startApi({ CRASH_POINT: 'during_provider_call' });
    const key = randomUUID();
    const body = { payment: paymentId, amount: 400 };
    void stack.clientOf(crashing).refund(key, body).catch(() => undefined);
    const refundId = await crashPointReached(crashing, 'during_provider_call');
    await crashing.exited;

    const worker = await stack.startWorker();
    try {
      await eventually(async () => ((await stateOf(refundId)).stored ? true : undefined), {
        timeoutMs: 20_000,
        what: 'the worker to finish the refund and store its answer',
      });
      await worker.waitForLine(({ json }) => json?.msg === 'refund reconciled' && json.refundId === refundId);
    } finally {
      await worker.stop();
    }

    const late = await stack.client.refund(key, body);
    expect(late.status).toBe(201);
    expect(late.headers.get('idempotent-replayed')).toBe('true');
    expect(late.body).toMatchObject({ id: refundId, status: 'succeeded' });
    await expectRefundedOnce(refundId, late, paymentId);
  });

  it('worker killed mid-job on a pending refund: the retry resumes it, refunded once', async () => {
    const paymentId = await paid('pm_card_refund_pending');
    const crashing = await stack.startWorker({ CRASH_POINT: 'worker_mid_job' });
    const key = randomUUID();
    const body = { payment: paymentId, amount: 400 };
    const pending = await stack.client.refund(key, body);
    const refundId = await crashPointReached(crashing, 'worker_mid_job');

    expect(pending.status).toBe(202);
    expect(refundId).toBe(pending.body.id);
    expect(await crashing.exited).toEqual({ code: null, signal: 'SIGKILL' });

    const resumed = await retryUntilFinal(key, body);

    expect(resumed.status).toBe(201);
    expect(resumed.body).toMatchObject({ id: refundId, status: 'succeeded' });
    await expectRefundedOnce(refundId, resumed, paymentId);
  });
});
