import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { useInProcessStack } from './support/in-process-app';
import { sendRaw } from './support/raw-http';

/**
 * What one client, or someone without a key, may cost the service: failed
 * authentications are limited per address and refused before the body is
 * read, a slow body is cut off, and a request that cannot get a database
 * connection is a 503 rather than a wait without end.
 */

// A stack per test starts a provider and an API: seconds on a loaded machine.
jest.setTimeout(30_000);

const UNKNOWN_KEY = `sk_${'A'.repeat(43)}`;
const payment = { amount: 500, currency: 'USD', payment_method: 'pm_card_ok' };

/** The head of a POST /v1/payments announcing a body of `length` bytes. */
function postHead(apiKey: string, length: number): string {
  return [
    'POST /v1/payments HTTP/1.1',
    'Host: 127.0.0.1',
    `Authorization: Bearer ${apiKey}`,
    `Idempotency-Key: ${randomUUID()}`,
    'Content-Type: application/json',
    `Content-Length: ${length}`,
    '',
    '',
  ].join('\r\n');
}

describe('failed authentications', () => {
  const stack = useInProcessStack({ config: { AUTH_FAILURE_LIMIT: '3', AUTH_FAILURE_WINDOW_MS: '60000' } }, 'test');

  const list = (apiKey: string) => request(stack.url).get('/v1/payments').set('Authorization', `Bearer ${apiKey}`);

  it('are limited per address: past the limit the address gets 429 with Retry-After, whatever key it sends', async () => {
    for (let i = 0; i < 3; i++) expect((await list(UNKNOWN_KEY)).status).toBe(401);

    const unknown = await list(UNKNOWN_KEY);
    const valid = await list(stack.apiKey);

    for (const refused of [unknown, valid]) {
      expect(refused.status).toBe(429);
      expect(refused.body.error).toMatchObject({ type: 'rate_limit_error', code: 'rate_limited' });
      expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(59);
    }
  });

  it('are refused before the body is read, and the connection closed', async () => {
    const reply = await sendRaw(stack.url, `${postHead(UNKNOWN_KEY, 60_000)}{"amount":`, { endWrites: false, withinMs: 5_000 });

    expect(reply).toMatch(/^HTTP\/1\.1 401 /);
    expect(reply).toMatch(/\r\nconnection: close\r\n/i);
    expect(reply).toContain('"code":"unauthenticated"');
  });

  it('count a key that is not of the shape we issue, too', async () => {
    for (let i = 0; i < 3; i++) expect((await list('not-a-key')).status).toBe(401);

    expect((await list(UNKNOWN_KEY)).status).toBe(429);
  });
});

describe('a slow body', () => {
  const stack = useInProcessStack({ config: { HTTP_REQUEST_TIMEOUT_MS: '1000' } });

  it('is cut off at HTTP_REQUEST_TIMEOUT_MS, and nothing is written', async () => {
    const started = Date.now();
    const reply = await sendRaw(stack.url, `${postHead(stack.apiKey, 100)}{"amount":`, { endWrites: false, withinMs: 8_000 });

    expect(reply).toMatch(/^HTTP\/1\.1 408 /);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_000);
    const [{ n }] = (await stack.dataSource.query('SELECT count(*)::int AS n FROM idempotency_keys')) as { n: number }[];
    expect(n).toBe(0);
  });
});

describe('a database with every connection busy', () => {
  const stack = useInProcessStack({ config: { DATABASE_POOL_SIZE: '1', DATABASE_POOL_TIMEOUT_MS: '200' } });

  it('gets a 503 with Retry-After after DATABASE_POOL_TIMEOUT_MS, not a wait without end; then serves again', async () => {
    const holder = stack.dataSource.createQueryRunner();
    await holder.connect();
    let busy;
    try {
      busy = await request(stack.url)
        .post('/v1/payments')
        .set('Authorization', `Bearer ${stack.apiKey}`)
        .set('Idempotency-Key', randomUUID())
        .send(payment);
    } finally {
      await holder.release();
    }

    expect(busy.status).toBe(503);
    expect(busy.body.error).toMatchObject({ code: 'service_unavailable' });
    expect(busy.headers['retry-after']).toBe('1');
    const after = await request(stack.url).get('/v1/payments').set('Authorization', `Bearer ${stack.apiKey}`);
    expect(after.status).toBe(200);
  });
});
