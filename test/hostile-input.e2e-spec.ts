import { randomUUID } from 'node:crypto';
import { type IncomingHttpHeaders, request as httpRequest } from 'node:http';
import request from 'supertest';
import { eventually } from './support/eventually';
import { useInProcessStack } from './support/in-process-app';
import { parseRaw, sendRaw } from './support/raw-http';

// Each file starts the API (and a provider) of its own: more than jest's 5 s on a loaded machine.
jest.setTimeout(30_000);

/** What supertest cannot send: a header repeated (an array value is sent as one line per item). */
function sendWithHeaders(
  url: string,
  method: string,
  headers: Record<string, string | string[]>,
  body?: string | Buffer,
): Promise<{ status: number; headers: IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${url}/v1/payments`, { method, headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

/**
 * Input JSON.parse or a URL accepts but Postgres, the canonical-JSON
 * fingerprint or a recursive walk cannot take: each was a 500 before, and
 * must be a 400 (or 404) in the envelope that writes nothing.
 */
describe('hostile and broken input', () => {
  // The provider logs the X-Request-Id of each call as its request id.
  const stack = useInProcessStack({ providerEnv: { LOG_LEVEL: 'info' } });

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

  describe('limits counted as Postgres counts them: code points', () => {
    const heart = '\u2764\ufe0f'; // two code points, one character to the eye
    const grin = '\u{1f600}'; // one code point, two UTF-16 units
    const body = (fields: object) => JSON.stringify({ amount: 500, currency: 'USD', payment_method: 'pm_card_ok', ...fields });

    it.each([
      ['an order id of 40 × ❤️ (80 code points)', { order_id: heart.repeat(40) }, 'order_id'],
      ['a description of 500 × ❤️ (1,000 code points)', { description: heart.repeat(500) }, 'description'],
      ['a payment method of 255 × ❤️ (510 code points)', { payment_method: heart.repeat(255) }, 'payment_method'],
      ['a description of 501 e + U+0301', { description: 'e\u0301'.repeat(251) }, 'description'],
      ['a metadata value of 251 × ❤️ (502 code points)', { metadata: { note: heart.repeat(251) } }, 'metadata'],
      ['a metadata key of 21 × ❤️ (42 code points)', { metadata: { [heart.repeat(21)]: 'x' } }, 'metadata'],
    ])('answers 400 for %s, naming the field, and writes nothing', async (_case, fields, param) => {
      const res = await postRaw(body(fields));

      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'parameter_invalid', param });
      expect(await written()).toBe(0);
    });

    it('takes every field at its limit, however many UTF-16 units or glyphs that is', async () => {
      const res = await postRaw(
        body({
          order_id: heart.repeat(32),
          description: grin.repeat(500),
          metadata: { [grin.repeat(40)]: heart.repeat(250), family: '\u{1f469}\u200d\u{1f469}\u200d\u{1f467}' },
        }),
      );

      expect(res.status).toBe(201);
      expect(res.body).toMatchObject({ order_id: heart.repeat(32), description: grin.repeat(500) });
    });
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

  describe('ambiguity and parser trivia', () => {
    it.each([
      ['amount missing', `{"currency":"USD","payment_method":"pm_card_ok"}`, 'amount', 'amount is required.'],
      ['amount null', `{"amount":null,"currency":"USD","payment_method":"pm_card_ok"}`, 'amount', 'amount is required.'],
      ['amount a string', `{"amount":"abc","currency":"USD","payment_method":"pm_card_ok"}`, 'amount', 'amount must be an integer number of minor units.'],
      ['currency missing', `{"amount":500,"payment_method":"pm_card_ok"}`, 'currency', 'currency is required.'],
      ['currency a number', `{"amount":500,"currency":840,"payment_method":"pm_card_ok"}`, 'currency', 'currency must be a string.'],
      ['payment_method missing', `{"amount":500,"currency":"USD"}`, 'payment_method', 'payment_method is required.'],
    ])('names the real problem: %s', async (_case, body, param, message) => {
      const res = await postRaw(body);

      expect(res.status).toBe(400);
      expect(res.body).toEqual({ error: { type: 'invalid_request_error', code: 'parameter_invalid', param, message } });
      expect(await written()).toBe(0);
    });

    it.each(['abc', '0x10', '0b11', '1e1', ' 5 ', '', '5.0', '+5'])('refuses limit=%j as not an integer', async (limit) => {
      const res = await request(stack.url)
        .get('/v1/payments')
        .query(`limit=${encodeURIComponent(limit)}`)
        .set('Authorization', `Bearer ${stack.apiKey}`);

      expect(res.status).toBe(400);
      expect(res.body.error).toEqual({
        type: 'invalid_request_error',
        code: 'parameter_invalid',
        param: 'limit',
        message: 'limit must be an integer.',
      });
    });

    it('reads limit written in plain decimal digits', async () => {
      const res = await request(stack.url).get('/v1/payments?limit=007').set('Authorization', `Bearer ${stack.apiKey}`);

      expect(res.status).toBe(200);
    });

    it.each([
      ['at the top level', `{${ok},"amount":1}`, 'amount'],
      ['spelled with an escape', `{${ok},"\\u0061mount":1}`, 'amount'],
      ['in metadata', `{${ok},"metadata":{"k":"1","k":"2"}}`, 'metadata.k'],
    ])('refuses a key given twice %s, naming it, and writes nothing', async (_case, body, param) => {
      const res = await postRaw(body);

      expect(res.status).toBe(400);
      expect(res.body.error).toEqual({
        type: 'invalid_request_error',
        code: 'parameter_invalid',
        param,
        message: `${param} is given more than once.`,
      });
      expect(await written()).toBe(0);
    });

    it('refuses a body in a charset other than UTF-8 with 415, and writes nothing', async () => {
      // supertest would send a Buffer as JSON: {"type":"Buffer",...}
      const res = await sendWithHeaders(
        stack.url,
        'POST',
        {
          Authorization: `Bearer ${stack.apiKey}`,
          'Idempotency-Key': randomUUID(),
          'Content-Type': 'application/json; charset=utf-16',
        },
        Buffer.from(`{${ok}}`, 'utf16le'),
      );

      expect(res.status).toBe(415);
      expect(JSON.parse(res.body)).toMatchObject({ error: { type: 'invalid_request_error', code: 'unsupported_media_type' } });
      expect(await written()).toBe(0);
    });

    it.each([
      ['an unterminated quoted key', '"abc\\"'],
      ['a key of spaces', '   '],
      ['a quoted key of spaces', '"   "'],
      ['an empty key', ''],
      ['two keys', ['key-one', 'key-two']],
    ])('answers 400 idempotency_key_invalid for %s, and writes nothing', async (_case, key) => {
      const res = await sendWithHeaders(
        stack.url,
        'POST',
        { Authorization: `Bearer ${stack.apiKey}`, 'Idempotency-Key': key, 'Content-Type': 'application/json' },
        `{${ok}}`,
      );

      expect(res.status).toBe(400);
      expect(JSON.parse(res.body)).toMatchObject({ error: { type: 'invalid_request_error', code: 'idempotency_key_invalid' } });
      expect(await written()).toBe(0);
    });

    it('answers 401 to two Authorization headers, even when the first is valid', async () => {
      const res = await sendWithHeaders(stack.url, 'GET', {
        Authorization: [`Bearer ${stack.apiKey}`, 'Bearer sk_someone_else'],
      });

      expect(res.status).toBe(401);
      expect(JSON.parse(res.body)).toEqual({
        error: {
          type: 'authentication_error',
          code: 'unauthenticated',
          message: 'Send exactly one Authorization header.',
        },
      });
    });
  });

  describe('HTTP hygiene', () => {
    const noCache = { 'x-content-type-options': 'nosniff', 'cache-control': 'no-store' };

    it.each([
      ['a listing', () => request(stack.url).get('/v1/payments').set('Authorization', `Bearer ${stack.apiKey}`), 200],
      ['a refused key', () => request(stack.url).get('/v1/payments'), 401],
      ['malformed JSON', () => postRaw('{"amount":'), 400],
      ['an unknown route', () => request(stack.url).get('/v1/nothing').set('Authorization', `Bearer ${stack.apiKey}`), 404],
      ['liveness', () => request(stack.url).get('/health/live'), 200],
      ['the API docs', () => request(stack.url).get('/docs-json'), 200],
    ])('sends nosniff and no-store on %s', async (_case, send, status) => {
      const res = await send();

      expect(res.status).toBe(status);
      expect(res.headers).toMatchObject(noCache);
    });

    it.each([
      ['DELETE', '/v1/payments', 'GET, HEAD, POST'],
      ['PUT', '/v1/payments/pay_x', 'GET, HEAD'],
      ['POST', '/health/live', 'GET, HEAD'],
      ['OPTIONS', '/v1/payments', 'GET, HEAD, POST'],
    ])('answers 405 with Allow to %s %s', async (method, path, allow) => {
      const send = request(stack.url)[method.toLowerCase() as 'delete' | 'put' | 'post' | 'options'];
      const res = await send(path).set('Authorization', `Bearer ${stack.apiKey}`);

      expect(res.status).toBe(405);
      expect(res.headers.allow).toBe(allow);
      expect(res.body).toEqual({
        error: { type: 'invalid_request_error', code: 'method_not_allowed', message: `${method} is not allowed here; use ${allow}.` },
      });
    });

    it("sends the provider our request id, never the client's X-Request-Id", async () => {
      const res = await request(stack.url)
        .post('/v1/payments')
        .set('Authorization', `Bearer ${stack.apiKey}`)
        .set('Idempotency-Key', randomUUID())
        .set('X-Request-Id', 'chosen-by-the-client')
        .send({ amount: 500, currency: 'USD', payment_method: 'pm_card_ok' });

      expect(res.status).toBe(201);
      const ours = res.headers['x-request-id'];
      expect(ours).toMatch(/^req_[0-9a-f-]{36}$/);
      // The provider's log line for the call may come after our answer.
      const callIds = () =>
        stack.provider
          .output()
          .map((line) => JSON.parse(line) as { req?: { id?: string; url?: string } })
          .filter((entry) => entry.req?.url === '/charges')
          .map((entry) => entry.req?.id);
      await eventually(() => (callIds().includes(ours) ? true : undefined), { what: 'the provider to log our id' });
      expect(callIds()).not.toContain('chosen-by-the-client');
    });

    it.each([
      ['a malformed request line', 'GET / HTTP/1.1 junk\r\nHost: x\r\n\r\n', 400, 'request_malformed'],
      ['headers too large', `GET / HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`, 431, 'request_headers_too_large'],
    ])("answers %s from Node's HTTP parser in the envelope", async (_case, bytes, status, code) => {
      const answer = parseRaw(await sendRaw(stack.url, bytes));

      expect(answer.status).toBe(status);
      expect(answer.headers).toMatchObject({ 'content-type': 'application/json', connection: 'close', ...noCache });
      expect(answer.headers['x-request-id']).toMatch(/^req_/);
      expect(answer.body).toEqual({ error: { type: 'invalid_request_error', code, message: expect.any(String) } });
    });
  });
});
