import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { useInProcessStack } from './support/in-process-app';

/**
 * Input JSON.parse or a URL accepts but Postgres, the canonical-JSON
 * fingerprint or a recursive walk cannot take: each was a 500 before, and
 * must be a 400 (or 404) in the envelope that writes nothing.
 */
describe('hostile and broken input', () => {
  const stack = useInProcessStack();

  const ok = '"amount":500,"currency":"USD","payment_method":"pm_card_ok"';

  function postRaw(body: string) {
    return request(stack.url)
      .post('/v1/payments')
      .set('Authorization', `Bearer ${stack.apiKey}`)
      .set('Idempotency-Key', randomUUID())
      .set('Content-Type', 'application/json')
      .send(body);
  }

  async function written(): Promise<number> {
    const [{ n }] = (await stack.dataSource.query(
      'SELECT (SELECT count(*) FROM payments) + (SELECT count(*) FROM idempotency_keys) AS n',
    )) as { n: string }[];
    return Number(n);
  }

  it.each([
    ['a lone surrogate in a string', `{${ok},"description":"\\ud800"}`, 'description'],
    ['a lone surrogate in a metadata key', `{${ok},"metadata":{"\\udc00":"x"}}`, 'metadata'],
    ['a number out of range', `{"amount":1e309,"currency":"USD","payment_method":"pm_card_ok"}`, 'amount'],
    ['U+0000 in a string', `{${ok},"description":"a\\u0000b"}`, 'description'],
    ['U+0000 in a metadata value', `{${ok},"metadata":{"k":"\\u0000"}}`, 'metadata.k'],
    ['U+0000 in a metadata key', `{${ok},"metadata":{"\\u0000":"v"}}`, 'metadata'],
    ['U+0000 in the order id', `{${ok},"order_id":"ord\\u0000"}`, 'order_id'],
  ])('answers 400 for %s, naming the field, and writes nothing', async (_case, body, param) => {
    const res = await postRaw(body);

    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ type: 'invalid_request_error', code: 'parameter_invalid', param });
    expect(res.headers['x-request-id']).toBeDefined();
    expect(await written()).toBe(0);
  });

  it('answers 400 for a body nested 3,000 levels deep, and writes nothing', async () => {
    const res = await postRaw(`{${ok},"metadata":${'['.repeat(3_000)}${']'.repeat(3_000)}}`);

    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'parameter_invalid', param: expect.stringMatching(/^metadata/) });
    expect(await written()).toBe(0);
  });

  it('answers 404 for a payment id holding U+0000, and 400 for such a cursor', async () => {
    const get = (path: string) => request(stack.url).get(path).set('Authorization', `Bearer ${stack.apiKey}`);

    const one = await get('/v1/payments/%00');
    const page = await get('/v1/payments?starting_after=pay_%00');

    expect(one.status).toBe(404);
    expect(one.body.error).toMatchObject({ code: 'resource_missing', message: 'No such payment.' });
    expect(page.status).toBe(400);
    expect(page.body.error).toMatchObject({ code: 'parameter_invalid', param: 'starting_after' });
  });
});
