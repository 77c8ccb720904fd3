import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { eventually } from './support/eventually';
import { useInProcessStack } from './support/in-process-app';
import { createClient } from './support/test-env';

// Each file starts the API (and a provider) of its own: more than jest's 5 s on a loaded machine.
jest.setTimeout(60_000);

/**
 * POST /v1/refunds end to end, on a real Postgres and Redis with the mock
 * provider as its own process: the second operation on the machinery of the
 * first (claim, fenced outcome, stored answer, replay, reconciliation), and
 * the promise of its own, never more than the payment.
 */
describe('POST /v1/refunds', () => {
  const stack = useInProcessStack({
    providerEnv: { PROVIDER_SLOW_REPLY_MS: '1500', PROVIDER_PENDING_SETTLE_MS: '500' },
    config: {
      PROVIDER_TIMEOUT_MS: '500',
      PROVIDER_DEADLINE_MS: '3000',
      PROVIDER_BACKOFF_BASE_MS: '50',
      PROVIDER_BACKOFF_CAP_MS: '200',
      IDEMPOTENCY_LEASE_MS: '5000',
    },
    client: 'shop',
  });
  const QUICK_RECONCILE = {
    RECONCILE_INTERVAL_MS: '100',
    RECONCILE_STALE_AFTER_MS: '0',
    RECONCILE_BACKOFF_BASE_MS: '100',
    RECONCILE_BACKOFF_CAP_MS: '400',
  };

  function post(path: '/v1/payments' | '/v1/refunds', key: string, payload: object, auth = stack.apiKey) {
    return request(stack.url).post(path).set('Authorization', `Bearer ${auth}`).set('Idempotency-Key', key).send(payload);
  }

  function get(path: string, auth = stack.apiKey) {
    return request(stack.url).get(path).set('Authorization', `Bearer ${auth}`);
  }

  /**
   * The ids of the client's listed `refund.succeeded` events, once there is
   * one. The list shows an event once every transaction older than its own
   * has ended, on the whole Postgres server (see
   * EventsRepository.listForClient): milliseconds, unless another run's
   * transaction is open.
   */
  function refundEventsListed(): Promise<string[]> {
    return eventually(
      async () => {
        const events = await get('/v1/events?type=refund.succeeded');
        const ids = (events.body.data as { data: { object: { id: string } } }[]).map((event) => event.data.object.id);
        return ids.length > 0 ? ids : undefined;
      },
      { what: 'a refund.succeeded event in the list' },
    );
  }

  /** A succeeded payment of `amount`, made with `paymentMethod`. */
  async function paid(amount = 500, paymentMethod = 'pm_card_ok'): Promise<{ id: string; provider_charge_id: string }> {
    const res = await post('/v1/payments', randomUUID(), { amount, currency: 'EUR', payment_method: paymentMethod });
    expect(res.status).toBe(201);
    return res.body as { id: string; provider_charge_id: string };
  }

  async function count(table: 'refunds' | 'idempotency_keys'): Promise<number> {
    const [row] = (await stack.dataSource.query(`SELECT count(*)::int AS n FROM ${table}`)) as { n: number }[];
    return row.n;
  }

  async function reserved(paymentId: string): Promise<{ amount_reserved: number; amount_refunded: number }> {
    const [row] = (await stack.dataSource.query('SELECT amount_reserved, amount_refunded FROM payments WHERE id = $1', [
      paymentId,
    ])) as { amount_reserved: number; amount_refunded: number }[];
    return row;
  }

  it('refunds part of a payment once, answers 201 and replays it byte for byte', async () => {
    const payment = await paid();
    const key = randomUUID();
    const first = await post('/v1/refunds', key, { payment: payment.id, amount: 200, reason: 'requested_by_customer' });
    const again = await post('/v1/refunds', key, { amount: 200, reason: 'requested_by_customer', payment: payment.id });

    expect(first.status).toBe(201);
    expect(Object.keys(first.body)).toEqual([
      'id', 'object', 'payment', 'amount', 'currency', 'status', 'reason', 'metadata',
      'provider_refund_id', 'failure_code', 'failure_message', 'created_at', 'updated_at',
    ]);
    expect(first.body).toMatchObject({
      object: 'refund',
      payment: payment.id,
      amount: 200,
      currency: 'EUR',
      status: 'succeeded',
      reason: 'requested_by_customer',
      failure_code: null,
    });
    expect(first.body.id).toMatch(/^re_/);
    expect(again.status).toBe(201);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.text).toBe(first.text);
    const providerRefunds = await stack.provider.refundsFor(first.body.id);
    expect(providerRefunds).toHaveLength(1);
    expect(providerRefunds[0]).toMatchObject({ charge: payment.provider_charge_id, amount: 200, id: first.body.provider_refund_id });

    const shown = await get(`/v1/payments/${payment.id}`);
    expect(shown.body).toMatchObject({ status: 'succeeded', amount_refunded: 200 });
    expect((await get(`/v1/refunds/${first.body.id}`)).body).toEqual(first.body);
    const listed = await get(`/v1/refunds?payment=${payment.id}`);
    expect(listed.body).toEqual({ object: 'list', data: [first.body], has_more: false });
    expect(await refundEventsListed()).toEqual([first.body.id]);
  });

  it('refunds all that is left when no amount is given, then refuses more (400 amount_too_large) and writes nothing', async () => {
    const payment = await paid(500);
    expect((await post('/v1/refunds', randomUUID(), { payment: payment.id, amount: 120 })).status).toBe(201);
    const rest = await post('/v1/refunds', randomUUID(), { payment: payment.id });
    expect(rest.status).toBe(201);
    expect(rest.body.amount).toBe(380);
    const keysBefore = await count('idempotency_keys');

    const more = await post('/v1/refunds', randomUUID(), { payment: payment.id, amount: 1 });

    expect(more.status).toBe(400);
    expect(more.body.error).toMatchObject({ code: 'amount_too_large', param: 'amount' });
    expect(await count('refunds')).toBe(2);
    expect(await count('idempotency_keys')).toBe(keysBefore);
    expect(await reserved(payment.id)).toEqual({ amount_reserved: 500, amount_refunded: 500 });
    expect((await get(`/v1/payments/${payment.id}`)).body.amount_refunded).toBe(500);
  });

  it('answers a refused refund with 402 refund_failed, stores it, and gives its amount back', async () => {
    const payment = await paid(500, 'pm_card_refund_fails');
    const key = randomUUID();
    const refused = await post('/v1/refunds', key, { payment: payment.id, amount: 300 });
    const replay = await post('/v1/refunds', key, { payment: payment.id, amount: 300 });

    expect(refused.status).toBe(402);
    expect(refused.body.error).toMatchObject({
      code: 'refund_failed',
      refund: { status: 'failed', amount: 300, failure_code: 'refund_declined' },
    });
    expect(replay.status).toBe(402);
    expect(replay.text).toBe(refused.text);
    expect(await reserved(payment.id)).toEqual({ amount_reserved: 0, amount_refunded: 0 });
    // All of it is left to refund again.
    expect((await post('/v1/refunds', randomUUID(), { payment: payment.id, amount: 500 })).status).toBe(402);
  });

  it('refuses what cannot be refunded before writing anything: 404, 409, another client', async () => {
    const declined = await post('/v1/payments', randomUUID(), { amount: 500, currency: 'EUR', payment_method: 'pm_card_declined' });
    expect(declined.status).toBe(402);
    const mine = await paid();
    const other = await createClient(stack.dataSource, 'other');

    const notRefundable = await post('/v1/refunds', randomUUID(), { payment: declined.body.error.payment.id });
    const unknown = await post('/v1/refunds', randomUUID(), { payment: 'pay_01JDQ2ZC4R5S8V9W0X1Y2Z3A4B' });
    const malformed = await post('/v1/refunds', randomUUID(), { payment: 'not a payment' });
    const theirs = await post('/v1/refunds', randomUUID(), { payment: mine.id }, other.apiKey);
    const invalid = await post('/v1/refunds', randomUUID(), { payment: mine.id, amount: '100' });

    expect(notRefundable.status).toBe(409);
    expect(notRefundable.body.error.code).toBe('payment_not_refundable');
    for (const res of [unknown, malformed, theirs]) {
      expect(res.status).toBe(404);
      expect(res.body.error).toMatchObject({ code: 'resource_missing', param: 'payment' });
    }
    expect(invalid.status).toBe(400);
    expect(invalid.body.error).toMatchObject({ code: 'parameter_invalid', param: 'amount' });
    expect(await count('refunds')).toBe(0);
    const charges = [mine.provider_charge_id, declined.body.error.payment.provider_charge_id];
    expect((await stack.provider.refunds()).filter((refund) => charges.includes(refund.charge))).toEqual([]);
  });

  it('keeps one key space across routes: a key of one route is 422 on the other', async () => {
    const paymentKey = randomUUID();
    const payment = await post('/v1/payments', paymentKey, { amount: 500, currency: 'EUR', payment_method: 'pm_card_ok' });
    const refundKey = randomUUID();
    const refund = await post('/v1/refunds', refundKey, { payment: payment.body.id, amount: 100 });
    expect(refund.status).toBe(201);

    const paymentKeyOnRefunds = await post('/v1/refunds', paymentKey, { payment: payment.body.id, amount: 100 });
    const refundKeyOnPayments = await post('/v1/payments', refundKey, { amount: 500, currency: 'EUR', payment_method: 'pm_card_ok' });

    expect(paymentKeyOnRefunds.status).toBe(422);
    expect(paymentKeyOnRefunds.body.error.code).toBe('idempotency_key_reused');
    expect(refundKeyOnPayments.status).toBe(422);
    expect(refundKeyOnPayments.body.error.code).toBe('idempotency_key_reused');
    // The key's verdict comes before the payment's: even a refund of no payment at all is 422 under a used key.
    const malformedUnderUsedKey = await post('/v1/refunds', refundKey, { payment: 'not a payment' });
    expect(malformedUnderUsedKey.status).toBe(422);
    expect(malformedUnderUsedKey.body.error.code).toBe('idempotency_key_reused');
    expect(await count('refunds')).toBe(1);
  });

  it('never refunds more than the payment: 50 concurrent partial refunds under 50 keys', async () => {
    const payment = await paid(500);
    const responses = await Promise.all(
      Array.from({ length: 50 }, () => post('/v1/refunds', randomUUID(), { payment: payment.id, amount: 30 })),
    );

    const statuses = responses.map((res) => res.status);
    expect(statuses.filter((status) => status !== 201 && status !== 400)).toEqual([]);
    expect(statuses.filter((status) => status === 201)).toHaveLength(16);
    for (const res of responses.filter((res) => res.status === 400)) expect(res.body.error.code).toBe('amount_too_large');
    const providerRefunds = (await stack.provider.refunds()).filter((refund) => refund.charge === payment.provider_charge_id);
    expect(providerRefunds.reduce((sum, refund) => sum + refund.amount, 0)).toBe(480);
    expect(await reserved(payment.id)).toEqual({ amount_reserved: 480, amount_refunded: 480 });
  });

  it('refunds all that is left once: 10 concurrent refunds without an amount under 10 keys', async () => {
    const payment = await paid(500);
    expect((await post('/v1/refunds', randomUUID(), { payment: payment.id, amount: 120 })).status).toBe(201);

    // Each takes what is left as its locked row says, after the ones before it.
    const responses = await Promise.all(Array.from({ length: 10 }, () => post('/v1/refunds', randomUUID(), { payment: payment.id })));

    const created = responses.filter((res) => res.status === 201);
    expect(created.map((res) => res.body.amount)).toEqual([380]);
    for (const res of responses.filter((res) => res.status !== 201)) {
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'amount_too_large', message: 'Nothing is left to refund on this payment.' });
    }
    expect(await reserved(payment.id)).toEqual({ amount_reserved: 500, amount_refunded: 500 });
    expect(await count('refunds')).toBe(2);
    // The refused ones took their keys back: the payment's and the two refunds' are left.
    expect(await count('idempotency_keys')).toBe(3);
  });

  it.each(['pm_card_refund_lost_response', 'pm_card_refund_timeout'])(
    'survives a lost provider reply (%s): one provider refund, and the retry replays it',
    async (paymentMethod) => {
      const payment = await paid(500, paymentMethod);
      const key = randomUUID();
      const first = await post('/v1/refunds', key, { payment: payment.id, amount: 250 });
      const retry = await post('/v1/refunds', key, { payment: payment.id, amount: 250 });

      expect(first.status).toBe(201);
      expect(retry.text).toBe(first.text);
      expect(await stack.provider.refundsFor(first.body.id)).toHaveLength(1);
    },
  );

  it('answers 202 for a refund the provider holds as pending, and the worker settles it', async () => {
    const payment = await paid(500, 'pm_card_refund_pending');
    const key = randomUUID();
    const accepted = await post('/v1/refunds', key, { payment: payment.id, amount: 500 });
    expect(accepted.status).toBe(202);
    expect(accepted.body).toMatchObject({ status: 'pending', amount: 500 });
    expect(accepted.headers['retry-after']).toMatch(/^\d+$/);
    // Reserved while pending: nothing is left to refund.
    expect((await post('/v1/refunds', randomUUID(), { payment: payment.id, amount: 1 })).status).toBe(400);

    await stack.startWorker(QUICK_RECONCILE);
    await eventually(async () => ((await get(`/v1/refunds/${accepted.body.id}`)).body.status === 'succeeded' ? true : undefined), {
      timeoutMs: 15_000,
      what: 'the worker to settle the pending refund',
    });

    const replay = await post('/v1/refunds', key, { payment: payment.id, amount: 500 });
    expect(replay.status).toBe(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.body).toMatchObject({ id: accepted.body.id, status: 'succeeded' });
    expect(await stack.provider.refundsFor(accepted.body.id)).toHaveLength(1);
    expect(await reserved(payment.id)).toEqual({ amount_reserved: 500, amount_refunded: 500 });
    expect(await refundEventsListed()).toEqual([accepted.body.id]);
  });
});

/**
 * The provider's refund events, applied as its charge events are: a refund
 * it held as pending settles from its event alone, with no worker running,
 * through the same fenced transition, and a duplicate changes nothing.
 */
describe('refund provider events', () => {
  const stack = useInProcessStack({
    providerEnv: { PROVIDER_PENDING_SETTLE_MS: '300', PROVIDER_WEBHOOK_DUPLICATE_RATE: '1' },
    providerEvents: true,
    client: 'shop',
  });

  function post(path: '/v1/payments' | '/v1/refunds', payload: object) {
    return request(stack.url)
      .post(path)
      .set('Authorization', `Bearer ${stack.apiKey}`)
      .set('Idempotency-Key', randomUUID())
      .send(payload);
  }

  it('settles a pending refund from its event, without the worker, once', async () => {
    const payment = await post('/v1/payments', { amount: 700, currency: 'USD', payment_method: 'pm_card_refund_pending' });
    expect(payment.status).toBe(201);
    const refund = await post('/v1/refunds', { payment: payment.body.id, amount: 300 });
    expect(refund.status).toBe(202);

    await eventually(
      async () => {
        const [row] = (await stack.dataSource.query('SELECT status FROM refunds WHERE id = $1', [refund.body.id])) as { status: string }[];
        return row.status === 'succeeded' ? true : undefined;
      },
      { timeoutMs: 10_000, what: 'the refund.succeeded event to settle the refund' },
    );

    const [sums] = (await stack.dataSource.query('SELECT amount_reserved, amount_refunded FROM payments WHERE id = $1', [
      payment.body.id,
    ])) as { amount_reserved: number; amount_refunded: number }[];
    expect(sums).toEqual({ amount_reserved: 300, amount_refunded: 300 });
    const [events] = (await stack.dataSource.query(
      `SELECT count(*)::int AS n FROM events WHERE refund_id = $1 AND type = 'refund.succeeded'`,
      [refund.body.id],
    )) as { n: number }[];
    expect(events.n).toBe(1);
  });
});
