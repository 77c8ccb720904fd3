import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { ClientRateLimit } from '../src/clients/client-rate-limit';
import { ClientThrottlerGuard } from '../src/clients/client-throttler.guard';
import { AnswerCache } from '../src/idempotency/answer-cache';
import { PaymentCreationService } from '../src/payments/payment-creation.service';
import { type InProcessStack, startInProcessStack, useInProcessStack } from './support/in-process-app';
import { type Reply, useProcessStack } from './support/process-stack';

/**
 * EarlyAnswers answers a new payment with a valid body, a retry of a
 * finished payment whose final answer this process holds, and a read of one
 * payment, before Express and Nest. The tests tell the paths apart by
 * whether the routes' rate-limit guard ran (only the pipeline runs it) or,
 * for replays, whether PaymentCreationService was asked at all: the early
 * answer must be the pipeline's, and whatever it cannot answer the same way
 * must reach the pipeline with its body intact.
 */

jest.setTimeout(30_000);

const BODY = { amount: 500, currency: 'USD', payment_method: 'pm_card_ok' };

/** Headers that differ between any two answers, whoever writes them. */
const PER_ANSWER = ['date', 'x-request-id', 'x-ratelimit-remaining', 'x-ratelimit-reset', 'keep-alive', 'connection'];

function stableHeaders(headers: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(headers).filter(([name]) => !PER_ANSWER.includes(name)));
}

/** The client's stack: where it listens and its API key. */
type Client = { url: string; apiKey: string };

/**
 * An authenticated `POST path` with an Idempotency-Key and `body` as JSON.
 * '/v1/payments/' is the same route to Express and Nest as '/v1/payments',
 * but not to EarlyAnswers, which takes only the exact spelling.
 */
function postAs({ url, apiKey }: Client, key: string, body: unknown, path = '/v1/payments') {
  return request(url).post(path).set('Authorization', `Bearer ${apiKey}`).set('Idempotency-Key', key).send(body as object);
}

/** The same with `text` sent as it is, under the content type given. */
function postTextAs({ url, apiKey }: Client, key: string, contentType: string, text: string, path = '/v1/payments') {
  return request(url).post(path).set('Authorization', `Bearer ${apiKey}`).set('Idempotency-Key', key).set('Content-Type', contentType).send(text);
}

/** The value of the one series `line` matches (its value captured) in the API's /metrics; 0 before it exists. */
async function metricValue(stack: InProcessStack, line: RegExp): Promise<number> {
  return Number(line.exec(await (await fetch(`${stack.metricsUrl}/metrics`)).text())?.[1] ?? 0);
}

describe('a replay answered before the framework', () => {
  const stack = useInProcessStack();
  let created: jest.SpyInstance;

  beforeEach(() => {
    created = jest.spyOn(stack.app.get(PaymentCreationService), 'create');
  });
  afterEach(() => created.mockRestore());

  const post = (key: string, body: unknown, path?: string) => postAs(stack, key, body, path);

  async function paymentCount(): Promise<number> {
    const [row] = (await stack.dataSource.query('SELECT count(*)::int AS n FROM payments')) as { n: number }[];
    return row.n;
  }

  it('is the answer the pipeline gives: status, bytes and headers, and the payment is not asked for', async () => {
    const key = randomUUID();
    const first = await post(key, BODY);
    expect(first.status).toBe(201);
    expect(created).toHaveBeenCalledTimes(1);

    // Another spelling of the same JSON: the fingerprint, not the bytes, decides.
    const early = await postTextAs(stack, key, 'application/json', '{"payment_method":"pm_card_ok", "currency":"USD",\n"amount":500.0}');
    expect(created).toHaveBeenCalledTimes(1);

    const throughPipeline = await post(key, BODY, '/v1/payments/');
    expect(created).toHaveBeenCalledTimes(2);

    expect(early.status).toBe(201);
    expect(early.text).toBe(first.text);
    expect(early.headers['idempotent-replayed']).toBe('true');
    expect(early.headers['x-request-id']).toMatch(/^req_/);
    expect(early.headers['x-ratelimit-remaining']).toMatch(/^\d+$/);
    expect(throughPipeline.status).toBe(201);
    expect(throughPipeline.text).toBe(early.text);
    expect(stableHeaders(early.headers)).toEqual(stableHeaders(throughPipeline.headers));
    expect(await paymentCount()).toBe(1);
  });

  it('is counted as a request: the payment and HTTP metrics move as through the pipeline', async () => {
    const key = randomUUID();
    await post(key, BODY);
    const metric = (line: RegExp) => metricValue(stack, line);
    const replays = /payment_answers_total\{status="201",replayed="true"\} (\d+)/;
    const posts = /http_request_duration_seconds_count\{method="POST",route="\/v1\/payments",status="201"\} (\d+)/;
    const [replaysBefore, postsBefore] = [await metric(replays), await metric(posts)];

    expect((await post(key, BODY)).status).toBe(201);
    expect(created).toHaveBeenCalledTimes(1);

    expect(await metric(replays)).toBe(replaysBefore + 1);
    expect(await metric(posts)).toBe(postsBefore + 1);
  });

  it('hands on every request it cannot answer the same way, body and all, and the pipeline answers it', async () => {
    const key = randomUUID();
    expect((await post(key, BODY)).status).toBe(201);
    const raw = (text: string) => postTextAs(stack, key, 'application/json', text);

    const reused = await post(key, { ...BODY, amount: 501 });
    expect(reused.status).toBe(422);
    expect(reused.body.error.code).toBe('idempotency_key_reused');
    // Invalid before it is a reuse, as the pipeline orders them.
    const invalid = await post(key, { ...BODY, amount: -1 });
    expect(invalid.status).toBe(400);
    expect(invalid.body.error).toMatchObject({ code: 'parameter_invalid', param: 'amount' });
    expect(created).toHaveBeenCalledTimes(2);

    // Refused by the middleware before any route: the parser's error, read once, reaches it.
    expect((await raw('{"amount": 500,')).body.error.code).toBe('body_invalid_json');
    expect((await raw(JSON.stringify({ ...BODY, x: 'y'.repeat(70_000) }))).status).toBe(413);
    const twice = await raw('{"amount":500,"amount":500,"currency":"USD","payment_method":"pm_card_ok"}');
    expect(twice.status).toBe(400);
    expect(twice.body.error).toMatchObject({ code: 'parameter_invalid', param: 'amount' });
    expect(created).toHaveBeenCalledTimes(2);

    // A replay again once the bad ones are gone: nothing above changed the key.
    expect((await post(key, BODY)).headers['idempotent-replayed']).toBe('true');
    expect(created).toHaveBeenCalledTimes(2);
    expect(await paymentCount()).toBe(1);
  });
});

/** An answer's object without what differs between any two payments or refunds: ids and times (kept as their types). */
function withoutIdentity(body: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(body).map(([name, value]) => [name, name === 'id' || /_(id|at)$/.test(name) ? typeof value : value]),
  );
}

describe('a create answered before the framework', () => {
  const stack = useInProcessStack();
  let guarded: jest.SpyInstance;

  beforeEach(async () => {
    // The first request of a client goes through the pipeline, whose guard looks its key up; after it the key is known here.
    await post(randomUUID(), BODY);
    guarded = jest.spyOn(ClientThrottlerGuard.prototype, 'canActivate');
  });
  afterEach(() => guarded.mockRestore());

  function post(key: string, body: unknown, path?: string) {
    return postAs(stack, key, body, path);
  }

  it('is the answer the pipeline gives for a charge, a decline and a pending charge: status, body and headers', async () => {
    for (const payment_method of ['pm_card_ok', 'pm_card_declined', 'pm_card_pending']) {
      const body = { ...BODY, payment_method, metadata: { cart: 'c_1' }, description: 'two mugs' };
      const early = await post(randomUUID(), body);
      expect(guarded).not.toHaveBeenCalled();
      const throughPipeline = await post(randomUUID(), body, '/v1/payments/');
      expect(guarded).toHaveBeenCalledTimes(1);
      guarded.mockClear();

      expect(early.status).toBe({ pm_card_ok: 201, pm_card_declined: 402, pm_card_pending: 202 }[payment_method]);
      expect(early.status).toBe(throughPipeline.status);
      expect(stableHeaders(early.headers)).toEqual(stableHeaders(throughPipeline.headers));
      const bodyOf = (answer: request.Response) => (answer.status === 402 ? answer.body.error.payment : answer.body) as Record<string, unknown>;
      expect(withoutIdentity(bodyOf(early))).toEqual(withoutIdentity(bodyOf(throughPipeline)));
      expect(early.headers['x-request-id']).toMatch(/^req_/);
    }
  });

  it('answers the service’s refusals in the envelope, and counts the key conflicts', async () => {
    const conflicts = /idempotency_conflicts_total\{code="idempotency_key_reused"\} (\d+)/;
    const before = await metricValue(stack, conflicts);
    const key = randomUUID();
    expect((await post(key, BODY)).status).toBe(201);
    guarded.mockClear();

    // As if another API process had answered the key: this one holds no answer for it (a replay is another path).
    const uncached = jest.spyOn(stack.app.get(AnswerCache), 'get').mockReturnValue(undefined);
    const reused = await post(key, { ...BODY, amount: 501 });
    uncached.mockRestore();
    const paid = await post(randomUUID(), { ...BODY, order_id: 'ord_early_1' });
    const paidAgain = await post(randomUUID(), { ...BODY, order_id: 'ord_early_1' });
    const noKey = await request(stack.url).post('/v1/payments').set('Authorization', `Bearer ${stack.apiKey}`).send(BODY);
    expect(guarded).not.toHaveBeenCalled();

    expect(reused.status).toBe(422);
    expect(reused.body.error).toMatchObject({ type: 'idempotency_error', code: 'idempotency_key_reused' });
    expect(paid.status).toBe(201);
    expect(paidAgain.status).toBe(409);
    expect(paidAgain.body.error.code).toBe('order_already_paid');
    expect(noKey.status).toBe(400);
    expect(noKey.body.error).toMatchObject({ type: 'invalid_request_error', code: 'idempotency_key_missing' });
    expect(await metricValue(stack, conflicts)).toBe(before + 1);
  });

  it('is counted once as a request, under the route, and as a payment answer not replayed', async () => {
    const posts = /http_request_duration_seconds_count\{method="POST",route="\/v1\/payments",status="201"\} (\d+)/;
    const answers = /payment_answers_total\{status="201",replayed="false"\} (\d+)/;
    const [postsBefore, answersBefore] = [await metricValue(stack, posts), await metricValue(stack, answers)];

    expect((await post(randomUUID(), BODY)).status).toBe(201);
    expect(guarded).not.toHaveBeenCalled();

    expect(await metricValue(stack, posts)).toBe(postsBefore + 1);
    expect(await metricValue(stack, answers)).toBe(answersBefore + 1);
  });

  const postRaw = (key: string, contentType: string, text: string, path?: string) => postTextAs(stack, key, contentType, text, path);

  it('answers what validation refuses as the pipeline does, and hands on what the parser refuses, with nothing written', async () => {
    const payments = async () => ((await stack.dataSource.query('SELECT count(*)::int AS n FROM payments')) as { n: number }[])[0].n;
    const before = await payments();
    const key = randomUUID();
    const refusedBoth = async (send: (path: string) => request.Test) => {
      const early = await send('/v1/payments');
      const throughPipeline = await send('/v1/payments/');
      expect(early.status).toBe(400);
      expect(early.text).toBe(throughPipeline.text);
      expect(stableHeaders(early.headers)).toEqual(stableHeaders(throughPipeline.headers));
      return early;
    };

    const invalid = await refusedBoth((path) => post(key, { ...BODY, amount: -1 }, path));
    const unknown = await refusedBoth((path) => post(key, { ...BODY, colour: 'red' }, path));
    const notJson = await refusedBoth((path) => postRaw(key, 'text/plain', 'amount=500', path));
    expect(guarded).toHaveBeenCalledTimes(3);
    guarded.mockClear();
    const remaining = Number((await post(randomUUID(), { ...BODY, amount: 0 })).headers['x-ratelimit-remaining']);
    const twice = await postRaw(key, 'application/json', '{"amount":500,"amount":500,"currency":"USD","payment_method":"pm_card_ok"}');
    const after = Number((await post(randomUUID(), { ...BODY, amount: 0 })).headers['x-ratelimit-remaining']);

    expect(invalid.body.error).toMatchObject({ code: 'parameter_invalid', param: 'amount' });
    expect(unknown.body.error).toMatchObject({ code: 'parameter_invalid', param: 'colour' });
    expect(notJson.body.error.message).toMatch(/Content-Type: application\/json/);
    // Refused by a middleware before any guard, through the pipeline: no rate limit taken for it.
    expect(twice.body.error).toMatchObject({ code: 'parameter_invalid', param: 'amount' });
    expect(after).toBe(remaining - 1);
    expect(guarded).not.toHaveBeenCalled();
    expect(await payments()).toBe(before);
    // The key was never claimed: it still makes a payment.
    expect((await post(key, BODY)).status).toBe(201);
  });
});

describe('a refund answered before the framework', () => {
  const stack = useInProcessStack();
  let guarded: jest.SpyInstance;
  let payment: string;

  beforeEach(async () => {
    // Also the client's first request on this process, through the pipeline: its key is known here after it.
    const paid = await postAs(stack, randomUUID(), { ...BODY, amount: 10_000 });
    expect(paid.status).toBe(201);
    payment = paid.body.id as string;
    guarded = jest.spyOn(ClientThrottlerGuard.prototype, 'canActivate');
  });
  afterEach(() => guarded.mockRestore());

  /** '/v1/refunds/' is the same route to Express and Nest, but not to EarlyAnswers. */
  const refund = (key: string, body: Record<string, unknown>, path = '/v1/refunds') => postAs(stack, key, body, path);

  it('is the answer the pipeline gives: status, headers, and the refund but for its ids and times', async () => {
    const body = { payment, amount: 100, reason: 'requested_by_customer', metadata: { ticket: 't_1' } };
    const early = await refund(randomUUID(), body);
    expect(guarded).not.toHaveBeenCalled();
    const throughPipeline = await refund(randomUUID(), body, '/v1/refunds/');
    expect(guarded).toHaveBeenCalledTimes(1);

    expect(early.status).toBe(201);
    expect(early.status).toBe(throughPipeline.status);
    expect(stableHeaders(early.headers)).toEqual(stableHeaders(throughPipeline.headers));
    expect(withoutIdentity(early.body)).toEqual(withoutIdentity(throughPipeline.body));
    expect(early.body).toMatchObject({ object: 'refund', payment, amount: 100, status: 'succeeded' });
  });

  it('replays a refund made by either path, byte for byte, and refuses as the pipeline does', async () => {
    const [earlyKey, pipelineKey] = [randomUUID(), randomUUID()];
    const madeEarly = await refund(earlyKey, { payment, amount: 200 });
    const madeThroughPipeline = await refund(pipelineKey, { payment, amount: 300 }, '/v1/refunds/');
    expect(guarded).toHaveBeenCalledTimes(1);
    guarded.mockClear();
    // A replay answered early (another spelling of the same JSON), and one through the pipeline.
    const replayedEarly = await refund(pipelineKey, { amount: 300, payment });
    const replayedThroughPipeline = await refund(earlyKey, { payment, amount: 200 }, '/v1/refunds/');
    expect(guarded).toHaveBeenCalledTimes(1);
    guarded.mockClear();

    for (const [made, replayed] of [
      [madeEarly, replayedThroughPipeline],
      [madeThroughPipeline, replayedEarly],
    ]) {
      expect(made.status).toBe(201);
      expect(replayed.status).toBe(201);
      expect(replayed.text).toBe(made.text);
      expect(replayed.headers['idempotent-replayed']).toBe('true');
    }

    for (const body of [{ payment, amount: 1_000_000 }, { payment, amount: 0 }, { payment: 'pay_01JZZZZZZZZZZZZZZZZZZZZZZZ' }]) {
      const early = await refund(randomUUID(), body);
      const throughPipeline = await refund(randomUUID(), body, '/v1/refunds/');
      expect(early.status).toBeGreaterThanOrEqual(400);
      expect(early.status).toBe(throughPipeline.status);
      expect(early.text).toBe(throughPipeline.text);
    }
    expect(guarded).toHaveBeenCalledTimes(3);
  });
});

describe('a read of one payment answered before the framework', () => {
  const stack = useInProcessStack();
  let guarded: jest.SpyInstance;

  beforeEach(() => {
    guarded = jest.spyOn(ClientThrottlerGuard.prototype, 'canActivate');
  });
  afterEach(() => guarded.mockRestore());

  /** With a query the path is the same route to Express, but not to EarlyAnswers. */
  const get = (path: string) => request(stack.url).get(path).set('Authorization', `Bearer ${stack.apiKey}`);
  const createPayment = () => postAs(stack, randomUUID(), BODY);

  it('is the answer the pipeline gives, for a payment and for none', async () => {
    const created = await createPayment();
    guarded.mockClear();
    for (const id of [created.body.id as string, 'pay_01JZZZZZZZZZZZZZZZZZZZZZZZ', 'not-a-payment-id']) {
      const early = await get(`/v1/payments/${id}`);
      expect(guarded).not.toHaveBeenCalled();
      const throughPipeline = await get(`/v1/payments/${id}?via=pipeline`);
      expect(guarded).toHaveBeenCalledTimes(1);
      guarded.mockClear();

      expect(early.status).toBe(id === created.body.id ? 200 : 404);
      expect(early.text).toBe(throughPipeline.text);
      expect(early.status).toBe(throughPipeline.status);
      expect(stableHeaders(early.headers)).toEqual(stableHeaders(throughPipeline.headers));
    }
    expect(JSON.parse((await get(`/v1/payments/${created.body.id}`)).text)).toEqual(created.body);
  });

  it('is counted in the HTTP metrics under the route', async () => {
    const created = await createPayment();
    const reads = /http_request_duration_seconds_count\{method="GET",route="\/v1\/payments\/:id",status="200"\} (\d+)/;
    const count = () => metricValue(stack, reads);
    const before = await count();
    guarded.mockClear();

    expect((await get(`/v1/payments/${created.body.id}`)).status).toBe(200);
    expect(guarded).not.toHaveBeenCalled();
    expect(await count()).toBe(before + 1);
  });

  it('leaves to the pipeline a read it does not know how to answer the same way', async () => {
    // No key: the pipeline's 401. An id with a %-escape: Express decodes it, and its route answers.
    expect((await request(stack.url).get('/v1/payments/pay_x')).status).toBe(401);
    expect((await get('/v1/payments/pay_%41')).status).toBe(404);
    expect(guarded).toHaveBeenCalledTimes(1);
  });
});

describe('limits on early answers', () => {
  it('counts them against the client’s rate limit, and past it answers the guard’s 429, to a replay and to a new payment', async () => {
    const stack = await startInProcessStack({ config: { RATE_LIMIT_REQUESTS: '3' } });
    try {
      const key = randomUUID();
      const post = (path?: string) => postAs(stack, key, BODY, path);
      const created = jest.spyOn(stack.app.get(PaymentCreationService), 'create');

      expect((await post()).status).toBe(201);
      const early = await post();
      expect(early.headers['x-ratelimit-remaining']).toBe('1');
      expect((await post()).status).toBe(201);
      const limited = await post();
      const limitedByGuard = await post('/v1/payments/');
      const limitedCreate = await postAs(stack, randomUUID(), BODY);

      expect(created).toHaveBeenCalledTimes(1);
      expect(limitedCreate.status).toBe(429);
      expect(limitedCreate.body).toEqual(limitedByGuard.body);
      expect(limited.status).toBe(429);
      expect(limited.body.error).toMatchObject({ type: 'rate_limit_error', code: 'rate_limited' });
      expect(Number(limited.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      expect(limitedByGuard.status).toBe(429);
      expect(stableHeaders(limited.headers)).toEqual(stableHeaders(limitedByGuard.headers));
      expect(limited.body).toEqual(limitedByGuard.body);
      // One budget: a read answered early is refused too.
      expect((await request(stack.url).get('/v1/payments/pay_x').set('Authorization', `Bearer ${stack.apiKey}`)).status).toBe(429);
    } finally {
      await stack.stop();
    }
  });

  it('does not answer while an address is refused for failed authentications: the refusal is the pipeline’s', async () => {
    const stack = await startInProcessStack({ config: { AUTH_FAILURE_LIMIT: '1' } });
    try {
      const key = randomUUID();
      const post = (auth: string) =>
        request(stack.url).post('/v1/payments').set('Authorization', `Bearer ${auth}`).set('Idempotency-Key', key).send(BODY);
      expect((await post(stack.apiKey)).status).toBe(201);

      expect((await post(`sk_${'x'.repeat(43)}`)).status).toBe(401);
      // The test's own address is now refused, whatever key it sends.
      const refused = await post(stack.apiKey);
      expect(refused.status).toBe(429);
      expect(refused.body.error.message).toMatch(/failed authentications/);
    } finally {
      await stack.stop();
    }
  });
});

describe('an early answer that meets an unexpected error', () => {
  const stack = useInProcessStack();

  it('is the filter’s 500 with the request id, and the process goes on answering', async () => {
    const auth = { Authorization: `Bearer ${stack.apiKey}` };
    const payment = await postAs(stack, randomUUID(), BODY);
    expect(payment.status).toBe(201);
    const take = jest.spyOn(stack.app.get(ClientRateLimit), 'take').mockImplementation(() => {
      throw new Error('boom');
    });
    try {
      const read = await request(stack.url).get(`/v1/payments/${payment.body.id}`).set(auth);
      const create = await postAs(stack, randomUUID(), BODY);
      for (const failed of [read, create]) {
        expect(failed.status).toBe(500);
        expect(failed.body.error).toMatchObject({ type: 'api_error', code: 'internal_error', request_id: failed.headers['x-request-id'] });
      }
    } finally {
      take.mockRestore();
    }
    expect((await request(stack.url).get(`/v1/payments/${payment.body.id}`).set(auth)).status).toBe(200);
  });
});

/** The provider's own delay in the log line's spec: what an early create's responseTime must include. */
const PROVIDER_LATENCY_MS = 150;

describe('an early answer’s log line', () => {
  const stack = useProcessStack({ client: 'early answers', providerEnv: { PROVIDER_LATENCY_MS: String(PROVIDER_LATENCY_MS) } });

  it('is the request log line the pipeline writes, with the answer’s request id, for a create and a replay', async () => {
    // The client's first request goes through the pipeline (its key is looked up there); the next ones are answered early.
    const first = await stack.client.post('logged', BODY);
    const second = await stack.client.post('logged too', BODY);
    const replay = await stack.client.post('logged', BODY);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');

    const lineOf = async ({ headers }: Reply) => {
      const id = headers.get('x-request-id');
      return (await stack.api.waitForLine(({ json }) => (json?.req as { id?: string } | undefined)?.id === id)).json as Record<string, unknown>;
    };
    const [throughPipeline, created, replayed] = [await lineOf(first), await lineOf(second), await lineOf(replay)];
    for (const early of [created, replayed]) {
      expect(early).toMatchObject({ msg: 'request completed', name: 'payments-api', res: { statusCode: 201 } });
      expect(early.req).toMatchObject({ method: 'POST', url: '/v1/payments', headers: { authorization: '[redacted]' } });
      expect(Object.keys(early).sort()).toEqual(Object.keys(throughPipeline).sort());
    }
    const headerNames = (line: Record<string, unknown>) => Object.keys((line.res as { headers: object }).headers).sort();
    expect(headerNames(created)).toEqual(headerNames(throughPipeline));
    expect(headerNames(replayed)).toEqual([...headerNames(throughPipeline), 'idempotent-replayed'].sort());
    // Timed from when the request is taken up: the provider's call included.
    expect(created.responseTime).toBeGreaterThanOrEqual(PROVIDER_LATENCY_MS);

    // What the work logs carries the request, as under Nest's middleware: here the provider client giving up.
    const unavailable = await stack.client.post('provider down', { ...BODY, payment_method: 'pm_card_unavailable' });
    const id = unavailable.headers.get('x-request-id');
    const gaveUp = await stack.api.waitForLine(({ json }) => typeof json?.msg === 'string' && json.msg.includes('gave up') && json.requestId === id);
    expect((gaveUp.json!.req as { id?: string } | undefined)?.id).toBe(id);
    expect(stack.api.output().join('\n')).not.toContain(stack.apiKey);
  });
});
