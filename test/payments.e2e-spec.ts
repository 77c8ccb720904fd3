import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { Ledger } from '../src/ledger/ledger.service';
import { PAYMENTS } from '../src/ledger/operations';
import { PaymentsRepository } from '../src/ledger/payments.repository';
import { eventually } from './support/eventually';
import { useInProcessStack } from './support/in-process-app';
import { createClient } from './support/test-env';

// Each file starts the API (and a provider) of its own: more than jest's 5 s on a loaded machine.
jest.setTimeout(30_000);

/**
 * The contract's outcome table, end to end: a real Postgres, a real Redis, the
 * mock provider as its own process, and the API as main.ts builds it.
 */
describe('POST /v1/payments', () => {
  const stack = useInProcessStack({
    providerEnv: { PROVIDER_SLOW_REPLY_MS: '1500', PROVIDER_PENDING_SETTLE_MS: '1000' },
    config: {
      PROVIDER_TIMEOUT_MS: '500',
      PROVIDER_DEADLINE_MS: '3000',
      PROVIDER_BACKOFF_BASE_MS: '50',
      PROVIDER_BACKOFF_CAP_MS: '200',
      IDEMPOTENCY_LEASE_MS: '5000',
    },
    client: 'shop',
  });
  /** Sweeps every 100 ms and retries soon, so the worker settles a payment within the test. */
  const QUICK_RECONCILE = {
    RECONCILE_INTERVAL_MS: '100',
    RECONCILE_STALE_AFTER_MS: '0',
    RECONCILE_BACKOFF_BASE_MS: '100',
    RECONCILE_BACKOFF_CAP_MS: '400',
  };

  const body = (overrides: Record<string, unknown> = {}) => ({
    amount: 500,
    currency: 'USD',
    payment_method: 'pm_card_ok',
    ...overrides,
  });

  function post(key: string | undefined, payload: unknown, auth = stack.apiKey) {
    const req = request(stack.url).post('/v1/payments').set('Authorization', `Bearer ${auth}`);
    if (key !== undefined) req.set('Idempotency-Key', key);
    return req.send(payload as object);
  }

  async function count(table: 'payments' | 'idempotency_keys'): Promise<number> {
    const [row] = (await stack.dataSource.query(`SELECT count(*)::int AS n FROM ${table}`)) as { n: number }[];
    return row.n;
  }

  it('charges once and answers 201 with the payment', async () => {
    const res = await post(randomUUID(), body({ order_id: 'ord_1', metadata: { cart: '42' } }));

    expect(res.status).toBe(201);
    expect(res.headers['idempotent-replayed']).toBeUndefined();
    expect(res.body).toMatchObject({
      object: 'payment',
      amount: 500,
      currency: 'USD',
      status: 'succeeded',
      order_id: 'ord_1',
      metadata: { cart: '42' },
      failure_code: null,
    });
    expect(res.body.id).toMatch(/^pay_/);
    const charges = await stack.provider.chargesFor(res.body.id);
    expect(charges).toHaveLength(1);
    expect(res.body.provider_charge_id).toBe(charges[0].id);
  });

  it('replays the stored answer byte for byte, whatever the key order and spacing', async () => {
    const key = randomUUID();
    const first = await post(key, body({ metadata: { a: '1', b: '2' } }));
    const again = await request(stack.url)
      .post('/v1/payments')
      .set('Authorization', `Bearer ${stack.apiKey}`)
      .set('Idempotency-Key', `"${key}"`)
      .set('Content-Type', 'application/json')
      .send(`{ "metadata": {"b":"2", "a":"1"},\n "payment_method": "pm_card_ok", "currency": "USD", "amount": 500 }`);

    expect(first.status).toBe(201);
    expect(again.status).toBe(201);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.text).toBe(first.text);
    expect(await stack.provider.chargesFor(first.body.id)).toHaveLength(1);
  });

  it('treats a retry to /v1/payments/ (trailing slash) as the same request', async () => {
    const key = randomUUID();
    const first = await post(key, body());
    const again = await request(stack.url)
      .post('/v1/payments/')
      .set('Authorization', `Bearer ${stack.apiKey}`)
      .set('Idempotency-Key', key)
      .send(body());

    expect(again.status).toBe(201);
    expect(again.text).toBe(first.text);
  });

  it.each(['pm_card_lost_response', 'pm_card_timeout'])(
    'survives a lost provider reply (%s): one charge, and the retry replays the same payment',
    async (paymentMethod) => {
      const key = randomUUID();
      const first = await post(key, body({ payment_method: paymentMethod }));
      const retry = await post(key, body({ payment_method: paymentMethod }));

      expect(first.status).toBe(201);
      expect(first.body.status).toBe('succeeded');
      expect(retry.status).toBe(201);
      expect(retry.text).toBe(first.text);
      expect(await stack.provider.chargesFor(first.body.id)).toHaveLength(1);
      expect(await count('payments')).toBe(1);
    },
  );

  it('refuses the same key with another amount (422) and changes nothing', async () => {
    const key = randomUUID();
    const first = await post(key, body());
    const [before] = await stack.dataSource.query('SELECT * FROM idempotency_keys');

    const reused = await post(key, body({ amount: 900 }));

    expect(reused.status).toBe(422);
    expect(reused.body).toEqual({
      error: { type: 'idempotency_error', code: 'idempotency_key_reused', message: expect.any(String) },
    });
    expect(await count('payments')).toBe(1);
    expect(await stack.dataSource.query('SELECT * FROM idempotency_keys')).toEqual([before]);
    expect((await post(key, body())).text).toBe(first.text);
  });

  it('turns 50 concurrent requests on one key into one payment and one charge', async () => {
    const key = randomUUID();
    const responses = await Promise.all(Array.from({ length: 50 }, () => post(key, body())));

    const statuses = responses.map((res) => res.status);
    expect(statuses.filter((status) => status >= 500)).toEqual([]);
    const created = responses.filter((res) => res.status === 201);
    expect(created.length).toBeGreaterThanOrEqual(1);
    const original = created.find((res) => res.headers['idempotent-replayed'] === undefined);
    expect(original).toBeDefined();
    for (const res of responses) {
      if (res.status === 409) {
        expect(res.body.error.code).toBe('idempotency_key_in_use');
        expect(res.headers['retry-after']).toMatch(/^\d+$/);
      } else {
        expect(res.status).toBe(201);
        expect(res.text).toBe(original!.text);
      }
    }
    expect(await count('payments')).toBe(1);
    expect(await stack.provider.chargesFor(original!.body.id)).toHaveLength(1);
  });

  it('stores a decline and replays it as 402', async () => {
    const key = randomUUID();
    const declined = await post(key, body({ payment_method: 'pm_card_declined', order_id: 'ord_d' }));
    const replay = await post(key, body({ payment_method: 'pm_card_declined', order_id: 'ord_d' }));

    expect(declined.status).toBe(402);
    expect(declined.body.error).toMatchObject({
      type: 'card_error',
      code: 'card_declined',
      payment: { status: 'failed', failure_code: 'card_declined', order_id: 'ord_d' },
    });
    expect(replay.status).toBe(402);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.text).toBe(declined.text);
    // A failed payment does not hold the order: the customer may pay it with another card.
    expect((await post(randomUUID(), body({ order_id: 'ord_d' }))).status).toBe(201);
  });

  it.each(['pm_card_flaky', 'pm_card_rate_limited'])('rides out %s inside one request', async (paymentMethod) => {
    const res = await post(randomUUID(), body({ payment_method: paymentMethod }));

    expect(res.status).toBe(201);
    expect(res.body.status).toBe('succeeded');
    expect(await stack.provider.chargesFor(res.body.id)).toHaveLength(1);
  });

  it('answers 202 while the provider is unavailable, resumes the same payment, then hands it to review', async () => {
    const key = randomUUID();
    const payload = body({ payment_method: 'pm_card_unavailable' });
    const first = await post(key, payload);

    expect(first.status).toBe(202);
    expect(first.headers['retry-after']).toMatch(/^\d+$/);
    expect(first.body.status).toBe('pending');

    const retry = await post(key, payload);
    expect(retry.status).toBe(202);
    expect(retry.body.id).toBe(first.body.id);
    expect(retry.headers['idempotent-replayed']).toBeUndefined();
    expect(await count('payments')).toBe(1);

    await stack.startWorker({ ...QUICK_RECONCILE, RECONCILE_MAX_ATTEMPTS: '3' });
    const reviewed = await eventually(
      async () => {
        const res = await request(stack.url).get(`/v1/payments/${first.body.id}`).set('Authorization', `Bearer ${stack.apiKey}`);
        return res.body.status === 'requires_review' ? res : undefined;
      },
      { what: 'requires_review' },
    );
    expect(reviewed.body.failure_code).toBe('reconciliation_exhausted');
    // Review is not final: the retry is told the payment as it is, not a stored answer.
    const late = await post(key, payload);
    expect(late.status).toBe(202);
    expect(late.headers['idempotent-replayed']).toBeUndefined();
    expect(late.headers['retry-after']).toBe('60');
    expect(late.body).toMatchObject({ id: first.body.id, status: 'requires_review' });
    expect(await stack.provider.chargesFor(first.body.id)).toHaveLength(0);
  });

  it('answers 202 for a pending charge; the worker settles it and a retry replays the final 201', async () => {
    const key = randomUUID();
    const payload = body({ payment_method: 'pm_card_pending' });
    const first = await post(key, payload);
    expect(first.status).toBe(202);
    expect(first.body.status).toBe('pending');

    await stack.startWorker({ ...QUICK_RECONCILE, RECONCILE_MAX_ATTEMPTS: '10' });
    const settled = await eventually(
      async () => {
        const res = await request(stack.url).get(`/v1/payments/${first.body.id}`).set('Authorization', `Bearer ${stack.apiKey}`);
        return res.body.status === 'pending' ? undefined : res;
      },
      { what: 'the pending charge to settle' },
    );
    expect(settled.body.status).toBe('succeeded');

    const retry = await post(key, payload);
    expect(retry.status).toBe(201);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(retry.body).toMatchObject({ id: first.body.id, status: 'succeeded' });
    expect(await stack.provider.chargesFor(first.body.id)).toHaveLength(1);
  });

  it('refuses a second payment for an order that has one (409 order_already_paid), storing nothing', async () => {
    expect((await post(randomUUID(), body({ order_id: 'ord_9' }))).status).toBe(201);
    const second = await post(randomUUID(), body({ order_id: 'ord_9' }));

    expect(second.status).toBe(409);
    expect(second.body.error).toMatchObject({ code: 'order_already_paid', param: 'order_id' });
    expect(await count('payments')).toBe(1);
    expect(await count('idempotency_keys')).toBe(1);
  });

  it('keeps clients apart: one key, two clients, two payments; another client’s payment is 404', async () => {
    const other = await createClient(stack.dataSource, 'other shop');
    const key = randomUUID();
    const mine = await post(key, body());
    const theirs = await post(key, body(), other.apiKey);

    expect(mine.status).toBe(201);
    expect(theirs.status).toBe(201);
    expect(theirs.headers['idempotent-replayed']).toBeUndefined();
    expect(theirs.body.id).not.toBe(mine.body.id);

    const peek = await request(stack.url).get(`/v1/payments/${mine.body.id}`).set('Authorization', `Bearer ${other.apiKey}`);
    expect(peek.status).toBe(404);
    expect(peek.body.error.code).toBe('resource_missing');
  });

  describe('bad input: the right 4xx in the envelope, and nothing written', () => {
    afterEach(async () => {
      expect(await count('payments')).toBe(0);
      expect(await count('idempotency_keys')).toBe(0);
    });

    it.each([
      ['amount', { amount: '500' }],
      ['amount', { amount: 0 }],
      ['amount', { amount: 100_000_000 }],
      ['amount', { amount: 5.5 }],
      ['amount', { amount: undefined }],
      ['currency', { currency: 'usd' }],
      ['currency', { currency: 'XXX' }],
      ['currency', { currency: 840 }],
      ['payment_method', { payment_method: '' }],
      ['payment_method', { payment_method: 'x'.repeat(256) }],
      ['order_id', { order_id: '' }],
      ['order_id', { order_id: 'o'.repeat(65) }],
      ['description', { description: 'd'.repeat(501) }],
      ['metadata', { metadata: ['a'] }],
      ['metadata', { metadata: { n: 1 } }],
      ['metadata', { metadata: { ['k'.repeat(41)]: 'v' } }],
      ['metadata', { metadata: Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`k${i}`, 'v'])) }],
      ['surprise', { surprise: true }],
    ])('400 parameter_invalid naming %s', async (param, overrides) => {
      const res = await post(randomUUID(), body(overrides));

      expect(res.status).toBe(400);
      expect(res.body).toEqual({
        error: { type: 'invalid_request_error', code: 'parameter_invalid', message: expect.any(String), param },
      });
    });

    it.each([
      ['missing', undefined, 'idempotency_key_missing'],
      ['too long', 'k'.repeat(256), 'idempotency_key_invalid'],
      ['non-ASCII', 'clé', 'idempotency_key_invalid'],
      ['badly quoted', '"abc', 'idempotency_key_invalid'],
    ])('400 for a %s Idempotency-Key', async (_name, key, code) => {
      const res = await post(key, body());

      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ type: 'invalid_request_error', code });
    });

    it('400 for two Idempotency-Key headers, which Node would join into one', async () => {
      const res = await request(stack.url)
        .post('/v1/payments')
        .set('Authorization', `Bearer ${stack.apiKey}`)
        // Node sends an array as repeated header lines; only supertest's types limit arrays to Cookie.
        .set('Idempotency-Key', ['a', 'b'] as unknown as string)
        .send(body());

      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('idempotency_key_invalid');
    });

    it.each([
      ['constructor', '{"amount":500,"currency":"USD","payment_method":"pm_card_ok","constructor":"x"}'],
      ['metadata.constructor', '{"amount":500,"currency":"USD","payment_method":"pm_card_ok","metadata":{"constructor":"x"}}'],
      ['__proto__', '{"amount":500,"currency":"USD","payment_method":"pm_card_ok","__proto__":{"a":"b"}}'],
    ])('400 naming %s, a key that names object machinery', async (param, json) => {
      const res = await request(stack.url)
        .post('/v1/payments')
        .set('Authorization', `Bearer ${stack.apiKey}`)
        .set('Idempotency-Key', randomUUID())
        .set('Content-Type', 'application/json')
        .send(json);

      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'parameter_invalid', param });
    });

    it('400 with a useful message for a body sent without a JSON content type', async () => {
      const res = await request(stack.url)
        .post('/v1/payments')
        .set('Authorization', `Bearer ${stack.apiKey}`)
        .set('Idempotency-Key', randomUUID())
        .set('Content-Type', 'text/plain')
        .send(JSON.stringify(body()));

      expect(res.status).toBe(400);
      expect(res.body.error.message).toMatch(/Content-Type: application\/json/);
    });

    it('checks the body before the key', async () => {
      const res = await post(undefined, body({ amount: -1 }));
      expect(res.body.error).toMatchObject({ code: 'parameter_invalid', param: 'amount' });
    });

    it('400 body_invalid_json for malformed JSON', async () => {
      const res = await request(stack.url)
        .post('/v1/payments')
        .set('Authorization', `Bearer ${stack.apiKey}`)
        .set('Idempotency-Key', randomUUID())
        .set('Content-Type', 'application/json')
        .send('{"amount": 500,');

      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ type: 'invalid_request_error', code: 'body_invalid_json' });
      // Answered before the request logger runs, and still traceable.
      expect(res.headers['x-request-id']).toMatch(/^req_/);
    });

    it('400 for a body that is not an object', async () => {
      const res = await post(randomUUID(), [body()]);
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('parameter_invalid');
    });

    it('413 body_too_large for an oversized body', async () => {
      const res = await post(randomUUID(), body({ description: 'x'.repeat(100_000) }));
      expect(res.status).toBe(413);
      expect(res.body.error.code).toBe('body_too_large');
    });

    it.each([
      ['no Authorization header', undefined],
      ['an unknown key', 'Bearer sk_nope'],
      ['another scheme', `Basic ${Buffer.from('a:b').toString('base64')}`],
    ])('401 with %s', async (_name, authorization) => {
      const req = request(stack.url).post('/v1/payments').set('Idempotency-Key', randomUUID());
      if (authorization) req.set('Authorization', authorization);
      const res = await req.send(body());

      expect(res.status).toBe(401);
      expect(res.body.error).toMatchObject({ type: 'authentication_error', code: 'unauthenticated' });
    });

    it('404 in the envelope for an unknown route', async () => {
      const res = await request(stack.url).get('/v2/nothing');
      expect(res.status).toBe(404);
      expect(res.body.error.code).toBe('route_not_found');
    });
  });

  it('refuses an outcome written under a token that does not hold the lease', async () => {
    const key = randomUUID();
    const pending = await post(key, body({ payment_method: 'pm_card_unavailable' }));
    const [{ client_id: clientId }] = await stack.dataSource.query('SELECT client_id FROM idempotency_keys');

    const read = await stack.app.get(PaymentsRepository).findForClient(stack.dataSource.manager, clientId, pending.body.id);
    const written = await stack.app
      .get(Ledger)
      .recordOutcome(PAYMENTS, { clientId, key, token: randomUUID() }, read!, {
        status: 'succeeded',
        providerId: 'ch_forged',
      });

    expect(written).toBeUndefined();
    const [payment] = await stack.dataSource.query('SELECT status, provider_charge_id FROM payments');
    expect(payment).toEqual({ status: 'pending', provider_charge_id: null });
  });
});

describe('GET /v1/payments', () => {
  const stack = useInProcessStack();

  const get = (path: string) => request(stack.url).get(path).set('Authorization', `Bearer ${stack.apiKey}`);

  it('pages through the client’s payments, newest first', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await request(stack.url)
        .post('/v1/payments')
        .set('Authorization', `Bearer ${stack.apiKey}`)
        .set('Idempotency-Key', randomUUID())
        .send({ amount: 100 + i, currency: 'EUR', payment_method: 'pm_card_ok' });
      ids.push(res.body.id);
    }
    const newestFirst = [...ids].reverse();

    const page1 = await get('/v1/payments?limit=2');
    const page2 = await get(`/v1/payments?limit=2&starting_after=${page1.body.data[1].id}`);
    const page3 = await get(`/v1/payments?limit=2&starting_after=${page2.body.data[1].id}`);

    expect(page1.body).toMatchObject({ object: 'list', has_more: true });
    expect([...page1.body.data, ...page2.body.data, ...page3.body.data].map((p: { id: string }) => p.id)).toEqual(
      newestFirst,
    );
    expect(page3.body.has_more).toBe(false);
    expect((await get('/v1/payments')).body.data).toHaveLength(5);
    expect((await get(`/v1/payments/${ids[0]}`)).body.id).toBe(ids[0]);
  });

  it('skips no payment created in the same millisecond as the cursor', async () => {
    const [{ id: clientId }] = await stack.dataSource.query('SELECT id FROM api_clients');
    // Three payments 1 µs apart: the same millisecond, as a burst of requests gets.
    const burst = (i: number) => `pay_01BRST${String(i).padStart(20, '0')}`;
    for (const [i, micros] of ['000001', '000002', '000003'].entries()) {
      await stack.dataSource.query(
        `INSERT INTO payments (id, client_id, amount, currency, payment_method, provider_key, created_at)
         VALUES ($1, $2, 100, 'USD', 'pm_card_ok', $3, $4)`,
        [burst(i), clientId, `pk_burst_${i}`, `2026-11-29T10:00:00.${micros}Z`],
      );
    }

    const page1 = await get('/v1/payments?limit=1');
    const page2 = await get(`/v1/payments?limit=1&starting_after=${page1.body.data[0].id}`);
    const page3 = await get(`/v1/payments?limit=1&starting_after=${page2.body.data[0].id}`);

    expect([page1, page2, page3].map((page) => page.body.data[0]?.id)).toEqual([burst(2), burst(1), burst(0)]);
  });

  it.each([
    ['limit', 'limit=0'],
    ['limit', 'limit=101'],
    ['limit', 'limit=ten'],
    ['starting_after', 'starting_after=pay_unknown'],
  ])('400 parameter_invalid naming %s', async (param, query) => {
    const res = await get(`/v1/payments?${query}`);
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'parameter_invalid', param });
  });

  it('404 for a payment that does not exist', async () => {
    const res = await get('/v1/payments/pay_missing');
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe('resource_missing');
  });
});
