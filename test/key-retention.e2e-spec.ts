import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { eventually } from './support/eventually';
import { useInProcessStack } from './support/in-process-app';

jest.setTimeout(30_000);

/**
 * A key's retention counts from its stored answer. The bug this pins: a
 * payment still pending when its claim was older than the TTL was settled
 * later, its key expired at once, and the client's next retry started a
 * second payment and a second charge.
 */
describe('key retention', () => {
  /** 0.001 h = 3.6 s: shorter than the provider takes to settle a pending charge. */
  const TTL_MS = 3_600;
  const SETTLE_MS = 5_000;
  const stack = useInProcessStack({
    providerEnv: { PROVIDER_PENDING_SETTLE_MS: String(SETTLE_MS) },
    config: { IDEMPOTENCY_KEY_TTL_HOURS: '0.001' },
  });

  const payload = { amount: 700, currency: 'EUR', payment_method: 'pm_card_pending' };
  const post = (key: string, body: object = payload) =>
    request(stack.url)
      .post('/v1/payments')
      .set('Authorization', `Bearer ${stack.apiKey}`)
      .set('Idempotency-Key', key)
      .send(body);

  async function keyAgeMs(key: string): Promise<number> {
    const [row] = (await stack.dataSource.query(
      `SELECT extract(epoch FROM now() - created_at) * 1000 AS age FROM idempotency_keys WHERE key = $1`,
      [key],
    )) as { age: string }[];
    return Number(row.age);
  }

  it('replays a payment settled after its claim outlived the TTL: same payment, one charge', async () => {
    const key = randomUUID();
    const first = await post(key);
    expect(first.status).toBe(202);
    expect(first.body.status).toBe('pending');

    await eventually(async () => ((await keyAgeMs(key)) > TTL_MS ? true : undefined), {
      timeoutMs: TTL_MS * 3,
      what: 'the claim to outlive the TTL',
    });
    const stillPending = await post(key);
    expect(stillPending.status).toBe(202);
    expect(stillPending.body.id).toBe(first.body.id);

    await stack.startWorker({ RECONCILE_INTERVAL_MS: '100', RECONCILE_STALE_AFTER_MS: '0', RECONCILE_BACKOFF_BASE_MS: '200' });
    await eventually(
      async () => {
        const res = await request(stack.url).get(`/v1/payments/${first.body.id}`).set('Authorization', `Bearer ${stack.apiKey}`);
        return res.body.status === 'succeeded' ? true : undefined;
      },
      { timeoutMs: SETTLE_MS * 3, what: 'the worker to settle the payment' },
    );

    const late = await post(key);
    expect(late.status).toBe(201);
    expect(late.headers['idempotent-replayed']).toBe('true');
    expect(late.body.id).toBe(first.body.id);
    expect(await stack.provider.chargesFor(first.body.id)).toHaveLength(1);
    const [{ n }] = (await stack.dataSource.query(`SELECT count(*)::int AS n FROM payments`)) as { n: number }[];
    expect(n).toBe(1);
  });

  it('treats a key past its retention as a new request, though the API kept its answer to replay', async () => {
    const key = randomUUID();
    const first = await post(key, { ...payload, payment_method: 'pm_card_ok' });
    // The answer cache now holds it: this replay never reached Postgres.
    const replay = await post(key, { ...payload, payment_method: 'pm_card_ok' });
    expect(replay.headers['idempotent-replayed']).toBe('true');

    await eventually(
      async () => {
        const [row] = (await stack.dataSource.query(
          `SELECT expires_at <= now() AS expired FROM idempotency_keys WHERE key = $1`,
          [key],
        )) as { expired: boolean }[];
        return row.expired ? true : undefined;
      },
      { timeoutMs: TTL_MS * 3, what: 'the key to expire' },
    );
    const again = await post(key, { ...payload, payment_method: 'pm_card_ok', amount: 900 });

    expect(first.status).toBe(201);
    expect(again.status).toBe(201);
    expect(again.headers['idempotent-replayed']).toBeUndefined();
    expect(again.body.id).not.toBe(first.body.id);
    expect(again.body.amount).toBe(900);
  });
});
