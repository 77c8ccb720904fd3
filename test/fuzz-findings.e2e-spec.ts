import request from 'supertest';
import { useInProcessStack } from './support/in-process-app';
import { postSignedEvent, processedMessages } from './support/provider-events';
import { parseRaw, sendRaw } from './support/raw-http';

// Starting the stack takes seconds on a busy machine.
jest.setTimeout(30_000);

/**
 * What the fuzz suite (test/fuzz.e2e-spec.ts, npm run fuzz) found, pinned
 * as plain cases so each stays fixed whatever the seed draws.
 */
describe("the fuzz suite's findings", () => {
  const stack = useInProcessStack();
  const payment = { amount: 500, currency: 'USD', payment_method: 'pm_card_ok' };

  async function paymentsRows(): Promise<number> {
    const [{ n }] = (await stack.dataSource.query('SELECT count(*)::int AS n FROM payments')) as { n: number }[];
    return n;
  }

  describe('a /v1 path in other letter case (Express routes it all the same)', () => {
    it('is refused without a key, for a list', async () => {
      const res = await request(stack.url).get('/V1/PAYMENTS');

      expect(res.status).toBe(401);
      expect(res.body.error).toMatchObject({ type: 'authentication_error', code: 'unauthenticated' });
    });

    it('is refused without a key, for a create, and writes nothing (it was a 500)', async () => {
      const res = await request(stack.url).post('/V1/Payments').set('Idempotency-Key', 'k-1').send(payment);

      expect(res.status).toBe(401);
      expect(await paymentsRows()).toBe(0);
    });

    it("is the caller's own with a key", async () => {
      const res = await request(stack.url)
        .post('/V1/PAYMENTS')
        .set('Authorization', `Bearer ${stack.apiKey}`)
        .set('Idempotency-Key', 'k-2')
        .send(payment);
      const listed = await request(stack.url).get('/v1/payments').set('Authorization', `Bearer ${stack.apiKey}`);

      expect(res.status).toBe(201);
      expect(listed.body.data).toEqual([expect.objectContaining({ id: res.body.id })]);
    });
  });

  it('refuses a signed provider event whose version payments.provider_version cannot hold, and writes nothing (it was a 500)', async () => {
    const created = await request(stack.url)
      .post('/v1/payments')
      .set('Authorization', `Bearer ${stack.apiKey}`)
      .set('Idempotency-Key', 'k-3')
      .send({ ...payment, payment_method: 'pm_card_pending' });
    const id = created.body.id as string;
    const event = {
      id: 'evt_version_overflow',
      type: 'charge.succeeded',
      created_at: new Date().toISOString(),
      data: { id: 'ch_1', status: 'succeeded', amount: 500, currency: 'USD', failure_code: null, provider_key: `pk_${id}`, reference: id, version: 2 ** 31 },
    };

    const res = await postSignedEvent(stack.url, { body: JSON.stringify(event), id: event.id, secret: stack.config.providerEvents.secret });

    expect(created.status).toBe(202);
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'parameter_invalid' });
    expect(await processedMessages(stack.dataSource)).toBe(0);
  });

  it('refuses a signed provider event led by a byte-order mark as not an event, and writes nothing (it was a 500)', async () => {
    // The API's parser skips the mark; the signature library's JSON.parse threw on it after the signature verified.
    const res = await postSignedEvent(stack.url, { body: '\ufeff{}', id: 'evt_bom', secret: stack.config.providerEvents.secret });

    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'parameter_invalid' });
    expect(await processedMessages(stack.dataSource)).toBe(0);
  });

  describe("requests Node's HTTP server answers or drops on its own, in the envelope instead", () => {
    it.each([
      ['an HTTP/1.1 request without Host', 'GET /health/live HTTP/1.1\r\nConnection: close\r\n\r\n', 400, 'request_malformed'],
      ['an expectation other than 100-continue', 'GET /health/live HTTP/1.1\r\nHost: x\r\nExpect: junk\r\n\r\n', 417, 'expectation_failed'],
      ['CONNECT to a path with routes', 'CONNECT /v1/payments HTTP/1.1\r\nHost: x\r\n\r\n', 405, 'method_not_allowed'],
      ['CONNECT to an authority', 'CONNECT 127.0.0.1:443 HTTP/1.1\r\nHost: 127.0.0.1:443\r\n\r\n', 404, 'route_not_found'],
      // Its first answer threw from the router and took the process down.
      ['CONNECT to a path that does not decode', 'CONNECT /v1/payments/% HTTP/1.1\r\nHost: x\r\n\r\n', 404, 'route_not_found'],
    ])('answers %s', async (_case, bytes, status, code) => {
      const answer = parseRaw(await sendRaw(stack.url, bytes, { endWrites: false }));

      expect(answer.status).toBe(status);
      expect(answer.headers).toMatchObject({ 'content-type': expect.stringMatching(/^application\/json/), 'x-content-type-options': 'nosniff' });
      expect(answer.headers['x-request-id']).toMatch(/^req_/);
      expect(answer.body).toEqual({ error: { type: 'invalid_request_error', code, message: expect.any(String) } });
    });

    it('still reads an HTTP/1.0 request without Host, which needs none', async () => {
      const answer = parseRaw(await sendRaw(stack.url, 'GET /health/live HTTP/1.0\r\n\r\n', { endWrites: false }));

      expect(answer.status).toBe(200);
    });
  });
});
