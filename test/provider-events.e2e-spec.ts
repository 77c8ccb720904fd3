import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { eventually } from './support/eventually';
import { useInProcessStack } from './support/in-process-app';
import { postSignedEvent, processedMessages } from './support/provider-events';

/**
 * POST /v1/provider/events against the real API and Postgres, with events
 * signed here as the provider signs them: verification, at-most-once effect
 * per event id, versions that only move forward, and the same fenced
 * transition as every other writer.
 */
describe('POST /v1/provider/events', () => {
  const stack = useInProcessStack({ providerEnv: { PROVIDER_PENDING_SETTLE_MS: '600000' } });

  /** A pending payment, and the provider's charge for it as an event body at `version` with `status`. */
  async function pendingPayment(): Promise<{ paymentId: string; key: string; eventOf: (status: string, version: number) => object }> {
    const key = randomUUID();
    const created = await request(stack.url)
      .post('/v1/payments')
      .set('Authorization', `Bearer ${stack.apiKey}`)
      .set('Idempotency-Key', key)
      .send({ amount: 1500, currency: 'USD', payment_method: 'pm_card_pending' });
    expect(created.status).toBe(202);
    const [charge] = await stack.provider.chargesFor(created.body.id);
    return {
      paymentId: created.body.id,
      key,
      eventOf: (status, version) => ({
        id: `evt_${randomUUID()}`,
        type: `charge.${status}`,
        created_at: new Date().toISOString(),
        data: { ...charge, status, provider_key: charge.idempotency_key, reference: charge.reference, version },
      }),
    };
  }

  function deliver(event: object, { secret, at, id }: { secret?: string; at?: Date; id?: string } = {}) {
    return postSignedEvent(stack.url, {
      body: JSON.stringify(event),
      id: id ?? (event as { id: string }).id,
      secret: secret ?? stack.config.providerEvents.secret,
      at,
    });
  }

  const paymentStatus = async (paymentId: string) =>
    (await request(stack.url).get(`/v1/payments/${paymentId}`).set('Authorization', `Bearer ${stack.apiKey}`)).body
      .status as string;

  const processed = () => processedMessages(stack.dataSource);

  it('settles a pending payment from a final charge event, once; the retry then replays the stored 201', async () => {
    const { paymentId, key, eventOf } = await pendingPayment();
    const settled = eventOf('succeeded', 2);

    const first = await deliver(settled);
    const again = await deliver(settled);

    expect(first.status).toBe(200);
    expect(first.body).toEqual({ received: true, result: 'applied' });
    expect(again.body).toEqual({ received: true, result: 'duplicate' });
    expect(await paymentStatus(paymentId)).toBe('succeeded');
    const replay = await request(stack.url)
      .post('/v1/payments')
      .set('Authorization', `Bearer ${stack.apiKey}`)
      .set('Idempotency-Key', key)
      .send({ amount: 1500, currency: 'USD', payment_method: 'pm_card_pending' });
    expect(replay.status).toBe(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
  });

  it('ignores an older version arriving after a newer one, and a newer one for a final payment changes nothing', async () => {
    const { paymentId, eventOf } = await pendingPayment();

    expect((await deliver(eventOf('succeeded', 2))).body.result).toBe('applied');
    expect((await deliver(eventOf('pending', 1))).body.result).toBe('stale');
    expect((await deliver(eventOf('failed', 3))).body.result).toBe('noted');

    expect(await paymentStatus(paymentId)).toBe('succeeded');
    const [row] = (await stack.dataSource.query('SELECT provider_version FROM payments WHERE id = $1', [paymentId])) as {
      provider_version: number;
    }[];
    expect(row.provider_version).toBe(3);
  });

  it('acknowledges an event for a charge it does not know, changing nothing', async () => {
    const { eventOf } = await pendingPayment();
    const event = eventOf('succeeded', 2) as { data: Record<string, unknown> };
    const unknown = { ...event, data: { ...event.data, provider_key: 'pk_pay_unknown' } };

    expect((await deliver(unknown)).body).toEqual({ received: true, result: 'unknown_charge' });
  });

  it.each([
    ['signed with another secret', { secret: `whsec_${Buffer.alloc(32, 9).toString('base64')}` }],
    ['signed more than five minutes ago', { at: new Date(Date.now() - 6 * 60_000) }],
  ])('refuses an event %s with 400 in the envelope, writing nothing', async (_case, signing) => {
    const { paymentId, eventOf } = await pendingPayment();

    const res = await deliver(eventOf('succeeded', 2), signing);

    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ type: 'invalid_request_error', code: 'webhook_signature_invalid' });
    expect(await paymentStatus(paymentId)).toBe('pending');
    expect(await processed()).toBe(0);
  });

  it('refuses a signed event whose webhook-id is not its own id, writing nothing', async () => {
    const { paymentId, eventOf } = await pendingPayment();

    const res = await deliver(eventOf('succeeded', 2), { id: 'evt_other' });

    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'parameter_invalid', param: 'webhook-id' });
    expect(await paymentStatus(paymentId)).toBe('pending');
    expect(await processed()).toBe(0);
  });

  it('refuses an unsigned event and a tampered body', async () => {
    const { paymentId, eventOf } = await pendingPayment();
    const event = eventOf('succeeded', 2);

    const unsigned = await request(stack.url).post('/v1/provider/events').send(event);
    const body = JSON.stringify(event);
    const tampered = await postSignedEvent(stack.url, {
      body,
      id: (event as { id: string }).id,
      secret: stack.config.providerEvents.secret,
      sent: body.replace('"succeeded"', '"failed"   '),
    });

    expect(unsigned.status).toBe(400);
    expect(tampered.status).toBe(400);
    expect(await paymentStatus(paymentId)).toBe('pending');
    expect(await processed()).toBe(0);
  });

  it('answers 409 payment_busy while a request holds the payment, recording nothing, so the redelivery applies it', async () => {
    const { paymentId, eventOf } = await pendingPayment();
    await stack.dataSource.query(
      `UPDATE idempotency_keys SET lease_token = $2, leased_until = now() + interval '1 minute' WHERE payment_id = $1`,
      [paymentId, randomUUID()],
    );
    const event = eventOf('succeeded', 2);

    const busy = await deliver(event);

    expect(busy.status).toBe(409);
    expect(busy.body.error.code).toBe('payment_busy');
    expect(await processed()).toBe(0);
    await stack.dataSource.query(`UPDATE idempotency_keys SET lease_token = NULL, leased_until = NULL WHERE payment_id = $1`, [
      paymentId,
    ]);
    expect((await deliver(event)).body.result).toBe('applied');
    expect(await paymentStatus(paymentId)).toBe('succeeded');
  });
});

/**
 * The mock provider's own events, delivered at least once with duplicates
 * and random delays (so out of order), to an API with no worker: only the
 * events can settle what the requests left pending.
 */
describe('provider events from the provider, duplicated and reordered', () => {
  jest.setTimeout(30_000);
  const stack = useInProcessStack({
    providerEvents: true,
    providerEnv: {
      PROVIDER_PENDING_SETTLE_MS: '800',
      PROVIDER_WEBHOOK_DUPLICATE_RATE: '0.5',
      PROVIDER_WEBHOOK_MAX_DELAY_MS: '300',
    },
  });

  interface EmittedEvent {
    id: string;
    data: { provider_key: string; version: number; status: string };
  }

  it('ends every payment in its charge’s final state, each event recorded once, no version going back', async () => {
    const methods = ['pm_card_pending', 'pm_card_ok', 'pm_card_declined'];
    const created = await Promise.all(
      Array.from({ length: 24 }, (_, index) =>
        request(stack.url)
          .post('/v1/payments')
          .set('Authorization', `Bearer ${stack.apiKey}`)
          .set('Idempotency-Key', randomUUID())
          .send({ amount: 100 + index, currency: 'EUR', payment_method: methods[index % methods.length] }),
      ),
    );
    const pending = created.filter((res) => res.status === 202).map((res) => res.body.id as string);
    expect(pending).toHaveLength(8);

    const emitted = async () => (await (await fetch(`${stack.provider.url}/events`)).json()) as EmittedEvent[];
    const recorded = async () =>
      new Set(
        ((await stack.dataSource.query('SELECT message_id FROM processed_messages')) as { message_id: string }[]).map(
          (row) => row.message_id,
        ),
      );
    // Every charge's last event is in; every event the provider emitted is recorded as processed.
    await eventually(
      async () => {
        const events = await emitted();
        const seen = await recorded();
        return events.length === 24 + 8 && events.every((event) => seen.has(event.id)) ? true : undefined;
      },
      { timeoutMs: 20_000, what: 'every emitted event to be recorded as processed' },
    );

    const events = await emitted();
    const rows = (await stack.dataSource.query(
      'SELECT id, status, provider_key, provider_version FROM payments',
    )) as { id: string; status: string; provider_key: string; provider_version: number }[];
    for (const payment of rows) {
      const own = events.filter((event) => event.data.provider_key === payment.provider_key);
      const last = own.reduce((a, b) => (b.data.version > a.data.version ? b : a));
      expect({ id: payment.id, status: payment.status, version: payment.provider_version }).toEqual({
        id: payment.id,
        status: last.data.status,
        version: last.data.version,
      });
      expect(await stack.provider.chargesFor(payment.id)).toHaveLength(1);
    }
    expect((await recorded()).size).toBe(events.length);
    const metrics = await (await fetch(`${stack.metricsUrl}/metrics`)).text();
    expect(metrics).toMatch(new RegExp(`provider_events_total\\{result="applied"\\} ${pending.length}\\b`));
  });
});
