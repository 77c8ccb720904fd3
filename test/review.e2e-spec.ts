import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import request from 'supertest';
import { eventually } from './support/eventually';
import { type InProcessStack, useInProcessStack } from './support/in-process-app';
import { TEST_DATABASE_URL } from './support/test-env';

jest.setTimeout(30_000);

/**
 * requires_review is a state, not an end: the worker keeps asking the
 * provider and a definitive answer moves the payment once; a retry meanwhile
 * is told the payment as it is; an operator may resolve it, never against the
 * provider. The API and worker run in this process, the provider and the
 * operator command as real processes.
 */
/** Sends a payment to review at its first reconciliation attempt without a final answer. */
const REVIEW_AT_ONCE = {
  RECONCILE_INTERVAL_MS: '100',
  RECONCILE_STALE_AFTER_MS: '0',
  RECONCILE_MAX_ATTEMPTS: '1',
};

function postTo(stack: InProcessStack, key: string, payload: object) {
  return request(stack.url)
    .post('/v1/payments')
    .set('Authorization', `Bearer ${stack.apiKey}`)
    .set('Idempotency-Key', key)
    .send(payload);
}

async function statusIn(stack: InProcessStack, paymentId: string): Promise<string> {
  const res = await request(stack.url).get(`/v1/payments/${paymentId}`).set('Authorization', `Bearer ${stack.apiKey}`);
  return res.body.status as string;
}

function reachesIn(stack: InProcessStack, paymentId: string, status: string) {
  return eventually(async () => ((await statusIn(stack, paymentId)) === status ? true : undefined), {
    what: `payment ${paymentId} to be ${status}`,
  });
}

describe('payments in review', () => {
  const stack = useInProcessStack({ providerEnv: { PROVIDER_PENDING_SETTLE_MS: '2500' } });

  const post = (key: string, payload: object) => postTo(stack, key, payload);
  const statusOf = (paymentId: string) => statusIn(stack, paymentId);
  const reaches = (paymentId: string, status: string) => reachesIn(stack, paymentId, status);

  /** `npm run payment:resolve` (or refund:resolve) as a real process: its exit code and its one JSON line. */
  function resolve(args: string[], script = 'payment-resolve'): Promise<{ code: number; result: Record<string, unknown> }> {
    const entry = join(__dirname, '..', 'dist', 'src', 'operator', `${script}.js`);
    const env = {
      ...process.env,
      NODE_ENV: 'test',
      DATABASE_URL: TEST_DATABASE_URL,
      PROVIDER_URL: stack.provider.url,
      QUEUE_PREFIX: stack.config.queuePrefix,
    };
    return new Promise((done, fail) => {
      execFile(process.execPath, [entry, ...args], { env, timeout: 20_000 }, (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : -1;
        try {
          done({ code, result: JSON.parse(stdout) as Record<string, unknown> });
        } catch {
          fail(new Error(`${script} exited ${code}: ${stdout}${stderr}`));
        }
      });
    });
  }

  it('leaves review when the re-check finds the charge settled: one charge, 202 meanwhile, then the 201 replayed', async () => {
    const key = randomUUID();
    const payload = { amount: 900, currency: 'USD', payment_method: 'pm_card_pending' };
    const first = await post(key, payload);
    expect(first.status).toBe(202);

    await stack.startWorker({ ...REVIEW_AT_ONCE, REVIEW_RECHECK_INTERVAL_MS: '300' });
    await reaches(first.body.id, 'requires_review');
    const meanwhile = await post(key, payload);

    expect(meanwhile.status).toBe(202);
    expect(meanwhile.headers['retry-after']).toBe('60');
    expect(meanwhile.headers['idempotent-replayed']).toBeUndefined();
    expect(meanwhile.body).toMatchObject({ id: first.body.id, status: 'requires_review' });

    await reaches(first.body.id, 'succeeded');
    const late = await post(key, payload);
    expect(late.status).toBe(201);
    expect(late.headers['idempotent-replayed']).toBe('true');
    expect(late.body).toMatchObject({ id: first.body.id, status: 'succeeded' });
    expect(await stack.provider.chargesFor(first.body.id)).toHaveLength(1);
  });

  it('payments:review lists what waits for a person, the longest waiting first, with when the worker asks again', async () => {
    const payload = { amount: 700, currency: 'EUR', payment_method: 'pm_card_unavailable' };
    const first = await post(randomUUID(), payload);
    await stack.startWorker({ ...REVIEW_AT_ONCE, REVIEW_RECHECK_INTERVAL_MS: '3600000' });
    await reaches(first.body.id, 'requires_review');
    const second = await post(randomUUID(), payload);
    await reaches(second.body.id, 'requires_review');

    const entry = join(__dirname, '..', 'dist', 'src', 'operator', 'payments-review.js');
    const env = { ...process.env, NODE_ENV: 'test', DATABASE_URL: TEST_DATABASE_URL };
    const stdout = await new Promise<string>((done, fail) => {
      execFile(process.execPath, [entry, '--limit', '10'], { env, timeout: 20_000 }, (error, out, stderr) =>
        error ? fail(new Error(`payments:review failed: ${stderr}`)) : done(out),
      );
    });
    const lines = stdout.trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);

    expect(lines.map((line) => line.id)).toEqual([first.body.id, second.body.id]);
    for (const line of lines) {
      expect(line).toMatchObject({ object: 'payment', amount: 700, currency: 'EUR', failure_code: 'reconciliation_exhausted' });
      expect(Date.parse(line.next_recheck_at as string)).toBeGreaterThan(Date.parse(line.in_review_since as string));
    }
  });

  it('payment:resolve fails a review the provider never received, refusing to call it succeeded; the order is freed', async () => {
    const key = randomUUID();
    const payload = { amount: 900, currency: 'USD', payment_method: 'pm_card_unavailable', order_id: 'ord_review' };
    const first = await post(key, payload);
    expect(first.status).toBe(202);
    await stack.startWorker({ ...REVIEW_AT_ONCE, REVIEW_RECHECK_INTERVAL_MS: '3600000' });
    await reaches(first.body.id, 'requires_review');

    const refused = await resolve(['--id', first.body.id, '--status', 'succeeded', '--reason', 'customer says paid']);
    expect(refused).toMatchObject({ code: 1, result: { resolved: false, refusal: 'provider_never_charged' } });
    expect(await statusOf(first.body.id)).toBe('requires_review');

    const resolved = await resolve(['--id', first.body.id, '--status', 'failed', '--reason', 'never reached the provider', '--by', 'ops@example']);
    expect(resolved).toMatchObject({ code: 0, result: { resolved: true, payment: { id: first.body.id, status: 'failed' } } });
    const [row] = (await stack.dataSource.query('SELECT resolved_by, resolution_reason FROM payments WHERE id = $1', [
      first.body.id,
    ])) as { resolved_by: string; resolution_reason: string }[];
    expect(row).toEqual({ resolved_by: 'ops@example', resolution_reason: 'never reached the provider' });

    const replay = await post(key, payload);
    expect(replay.status).toBe(402);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    const again = await post(randomUUID(), { ...payload, payment_method: 'pm_card_ok' });
    expect(again.status).toBe(201);
    expect(await stack.provider.chargesFor(first.body.id)).toEqual([]);
  });

  it('payment:resolve refuses to contradict the provider, and refuses a payment that is not in review', async () => {
    const key = randomUUID();
    const first = await post(key, { amount: 900, currency: 'USD', payment_method: 'pm_card_pending' });
    await stack.startWorker({ ...REVIEW_AT_ONCE, REVIEW_RECHECK_INTERVAL_MS: '3600000' });
    await reaches(first.body.id, 'requires_review');
    await eventually(
      async () => ((await stack.provider.chargesFor(first.body.id))[0]?.status === 'succeeded' ? true : undefined),
      { what: 'the provider to settle the charge' },
    );

    const contradiction = await resolve(['--id', first.body.id, '--status', 'failed', '--reason', 'looks wrong']);
    expect(contradiction).toMatchObject({ code: 1, result: { resolved: false, refusal: 'provider_contradicts' } });
    const agreed = await resolve(['--id', first.body.id, '--status', 'succeeded', '--reason', 'provider settled it']);
    expect(agreed).toMatchObject({ code: 0, result: { resolved: true, payment: { status: 'succeeded' } } });

    const final = await resolve(['--id', first.body.id, '--status', 'succeeded', '--reason', 'twice']);
    expect(final).toMatchObject({ code: 1, result: { resolved: false, refusal: 'not_in_review' } });
    expect(await stack.provider.chargesFor(first.body.id)).toHaveLength(1);
  });
  it('sends a refund to review on the same ladder; refund:resolve settles it, never against the provider', async () => {
    const paid = await post(randomUUID(), { amount: 800, currency: 'USD', payment_method: 'pm_card_refund_pending' });
    expect(paid.status).toBe(201);
    const refundKey = randomUUID();
    const refundBody = { payment: paid.body.id, amount: 300 };
    const refund = await request(stack.url)
      .post('/v1/refunds')
      .set('Authorization', `Bearer ${stack.apiKey}`)
      .set('Idempotency-Key', refundKey)
      .send(refundBody);
    expect(refund.status).toBe(202);

    await stack.startWorker({ ...REVIEW_AT_ONCE, REVIEW_RECHECK_INTERVAL_MS: '3600000' });
    await eventually(
      async () => {
        const [row] = (await stack.dataSource.query('SELECT status FROM refunds WHERE id = $1', [refund.body.id])) as { status: string }[];
        return row.status === 'requires_review' ? true : undefined;
      },
      { what: 'the refund to reach review' },
    );
    await eventually(
      async () => ((await stack.provider.refundsFor(refund.body.id))[0]?.status === 'succeeded' ? true : undefined),
      { what: 'the provider to settle the refund' },
    );

    const contradiction = await resolve(['--id', refund.body.id, '--status', 'failed', '--reason', 'looks wrong'], 'refund-resolve');
    expect(contradiction).toMatchObject({ code: 1, result: { resolved: false, refusal: 'provider_contradicts' } });
    const agreed = await resolve(['--id', refund.body.id, '--status', 'succeeded', '--reason', 'provider settled it'], 'refund-resolve');
    expect(agreed).toMatchObject({ code: 0, result: { resolved: true, refund: { id: refund.body.id, status: 'succeeded' } } });

    const replay = await request(stack.url)
      .post('/v1/refunds')
      .set('Authorization', `Bearer ${stack.apiKey}`)
      .set('Idempotency-Key', refundKey)
      .send(refundBody);
    expect(replay.status).toBe(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    const payment = await request(stack.url).get(`/v1/payments/${paid.body.id}`).set('Authorization', `Bearer ${stack.apiKey}`);
    expect(payment.body.amount_refunded).toBe(300);
    expect(await stack.provider.refundsFor(refund.body.id)).toHaveLength(1);
  });
});

describe('a payment in review settled by the provider’s event', () => {
  // Settles well after the worker has sent the payment to review, however slowly the worker starts.
  const stack = useInProcessStack({ providerEvents: true, providerEnv: { PROVIDER_PENDING_SETTLE_MS: '5000' } });

  it('leaves review on the charge.succeeded event, long before any re-check: one charge, the 201 replayed', async () => {
    const key = randomUUID();
    const payload = { amount: 950, currency: 'USD', payment_method: 'pm_card_pending' };
    const first = await postTo(stack, key, payload);
    expect(first.status).toBe(202);

    // The ladder gives up at once; the review re-check is an hour away: only the event can settle it in time.
    await stack.startWorker({ ...REVIEW_AT_ONCE, REVIEW_RECHECK_INTERVAL_MS: '3600000' });
    await reachesIn(stack, first.body.id, 'requires_review');
    await reachesIn(stack, first.body.id, 'succeeded');

    const late = await postTo(stack, key, payload);
    expect(late.status).toBe(201);
    expect(late.headers['idempotent-replayed']).toBe('true');
    expect(await stack.provider.chargesFor(first.body.id)).toHaveLength(1);
  });
});

