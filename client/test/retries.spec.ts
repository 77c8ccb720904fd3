import { jest } from '@jest/globals';
import {
  ApiError,
  DeclineError,
  type GiveUpInfo,
  NetworkError,
  PaymentsClient,
  type PaymentsClientOptions,
  PendingAtDeadlineError,
  RefundFailedError,
} from '../src/index.js';
import { type Answer, type FakeApi, failure, fakeApi, payment, refund } from './fake-api.js';

/**
 * The client's retry rules, each on a scripted API under jest's fake timers:
 * the schedule is read off the times the requests were sent, and nothing
 * waits for real.
 */

const PAY = { amount: 500, currency: 'USD', payment_method: 'pm_card_ok' } as const;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

beforeEach(() => {
  jest.useFakeTimers({ now: new Date('2026-03-01T12:00:00.000Z') });
});

afterEach(() => {
  jest.useRealTimers();
});

interface Harness {
  api: FakeApi;
  client: PaymentsClient;
  giveUps: GiveUpInfo[];
}

/** A client of a scripted API; backoff base 100 ms, cap 1 s, the jitter's random fixed at 0.5 unless told. */
function harness(script: Parameters<typeof fakeApi>[0], options: Partial<PaymentsClientOptions> = {}): Harness {
  const api = fakeApi(script);
  const giveUps: GiveUpInfo[] = [];
  const client = new PaymentsClient({
    baseUrl: 'http://api.test/',
    apiKey: 'sk_test',
    fetch: api.fetch,
    random: () => 0.5,
    backoff: { baseMs: 100, capMs: 1_000 },
    onGiveUp: (info) => giveUps.push(info),
    ...options,
  });
  return { api, client, giveUps };
}

/** Runs the fake clock until the call settles; resolves with its outcome, never rejects. */
async function settle<T>(call: Promise<T>): Promise<{ value?: T; error?: unknown }> {
  const outcome = call.then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );
  await jest.runAllTimersAsync();
  return outcome;
}

/** When each request went out, in ms after the first. */
function schedule(api: FakeApi): number[] {
  return api.requests.map((request) => request.at - api.requests[0].at);
}

const ok = (body = payment()): Answer => ({ status: 201, body });
const unavailable: Answer = { status: 503, body: failure('service_unavailable') };

describe('the idempotency key', () => {
  it('is generated once per create and sent by every retry of it', async () => {
    const { api, client } = harness([unavailable, { network: 'ECONNRESET' }, ok()]);

    const { value } = await settle(client.payments.create(PAY));

    expect(value).toMatchObject({ status: 'succeeded' });
    const keys = api.requests.map((request) => request.headers.get('idempotency-key'));
    expect(keys).toHaveLength(3);
    expect(new Set(keys).size).toBe(1);
    expect(keys[0]).toMatch(UUID);
    expect(api.requests.map((request) => request.body)).toEqual([PAY, PAY, PAY]);
  });

  it('is a new one for each call of create', async () => {
    const { api, client } = harness([ok()]);

    await settle(client.payments.create(PAY));
    await settle(client.payments.create(PAY));
    await settle(client.refunds.create({ payment: 'pay_1' }));

    const keys = api.requests.map((request) => request.headers.get('idempotency-key'));
    expect(new Set(keys).size).toBe(3);
  });

  it("is the caller's own when given, on every retry, and on the error that carries it across a restart", async () => {
    const { api, client, giveUps } = harness([unavailable], { maxRetries: 2 });

    const { error } = await settle(client.payments.create(PAY, { idempotencyKey: 'order-77-attempt' }));

    expect(api.requests.map((request) => request.headers.get('idempotency-key'))).toEqual(Array(3).fill('order-77-attempt'));
    expect(error).toBeInstanceOf(ApiError);
    expect((error as ApiError).idempotencyKey).toBe('order-77-attempt');
    expect(giveUps[0]).toMatchObject({ operation: 'payments.create', idempotencyKey: 'order-77-attempt' });
  });

  it('is never sent on a GET', async () => {
    const { api, client } = harness([{ status: 200, body: payment() }]);

    await settle(client.payments.retrieve('pay_1'));

    expect(api.requests[0].headers.has('idempotency-key')).toBe(false);
    expect(api.requests[0].headers.get('authorization')).toBe('Bearer sk_test');
    expect(api.requests[0].url.href).toBe('http://api.test/v1/payments/pay_1');
  });
});

describe('what is retried', () => {
  it.each<[string, Answer]>([
    ['a refused connection', { network: 'ECONNREFUSED' }],
    ['a connection reset (a lost reply)', { network: 'ECONNRESET' }],
    ['408 request_timeout (the request did not arrive whole: nothing was done)', { status: 408, body: failure('request_timeout') }],
    ['409 idempotency_key_in_use', { status: 409, body: failure('idempotency_key_in_use') }],
    ['429 rate_limited', { status: 429, body: failure('rate_limited') }],
    ['500 internal_error', { status: 500, body: failure('internal_error') }],
    ['502 from a proxy, not JSON', { status: 502, text: '<html>Bad Gateway</html>' }],
    ['503 service_unavailable', unavailable],
    ['503 provider_unavailable', { status: 503, body: failure('provider_unavailable') }],
    ['504', { status: 504, text: '' }],
    ['a 201 whose body is not JSON', { status: 201, text: '{"id":"pay_' }],
  ])('%s, with the same key, until the answer is final', async (_case, answer) => {
    const { api, client, giveUps } = harness([answer, ok()]);

    const { value } = await settle(client.payments.create(PAY));

    expect(value).toMatchObject({ object: 'payment', status: 'succeeded' });
    expect(api.requests).toHaveLength(2);
    expect(giveUps).toEqual([]);
  });

  it('a timeout: each attempt waits at most timeoutMs for its answer', async () => {
    const { api, client } = harness(['hang', ok()], { timeoutMs: 2_000 });

    const { value } = await settle(client.payments.create(PAY));

    expect(value).toMatchObject({ status: 'succeeded' });
    // 2 s of waiting for the first answer, then the backoff's 50 ms (0.5 of 100).
    expect(schedule(api)).toEqual([0, 2_050]);
  });

  it('the GETs, on the same failures', async () => {
    const { api, client } = harness([{ network: 'ECONNREFUSED' }, unavailable, { status: 200, body: payment() }]);

    const { value } = await settle(client.payments.retrieve('pay_1'));

    expect(value).toMatchObject({ id: payment().id });
    expect(api.requests.map((request) => request.method)).toEqual(['GET', 'GET', 'GET']);
  });
});

describe('what is never retried', () => {
  it.each<[number, string, new (...args: never[]) => ApiError]>([
    [400, 'parameter_invalid', ApiError],
    [400, 'idempotency_key_invalid', ApiError],
    [401, 'unauthenticated', ApiError],
    [404, 'resource_missing', ApiError],
    [409, 'order_already_paid', ApiError],
    [409, 'payment_not_refundable', ApiError],
    [422, 'idempotency_key_reused', ApiError],
    [402, 'card_declined', DeclineError],
  ])('%d %s: one request, and the error', async (status, code, type) => {
    const body = code === 'card_declined' ? failure(code, { type: 'card_error', payment: payment({ status: 'failed' }) }) : failure(code, { param: 'amount' });
    const { api, client } = harness([{ status, body, headers: { 'x-request-id': 'req_1' } }, ok()]);

    const { error } = await settle(client.payments.create(PAY));

    expect(api.requests).toHaveLength(1);
    expect(error).toBeInstanceOf(type);
    expect(error).toMatchObject({ status, code, requestId: 'req_1', attempts: 1 });
  });

  it('402 refund_failed: RefundFailedError with the failed refund, final, so not a give-up', async () => {
    const failed = refund({ status: 'failed', failure_code: 'refund_declined' });
    const { api, client, giveUps } = harness([{ status: 402, body: failure('refund_failed', { type: 'card_error', refund: failed }) }]);

    const { error } = await settle(client.refunds.create({ payment: 'pay_1', amount: 300 }));

    expect(api.requests).toHaveLength(1);
    expect(error).toBeInstanceOf(RefundFailedError);
    expect((error as RefundFailedError).refund).toEqual(failed);
    expect(giveUps).toEqual([]);
  });

  it('a decline carries its failed payment and is the final outcome, not a give-up', async () => {
    const declined = payment({ status: 'failed', failure_code: 'card_declined' });
    const { client, giveUps } = harness([{ status: 402, body: failure('card_declined', { type: 'card_error', payment: declined }) }]);

    const { error } = await settle(client.payments.create(PAY));

    expect(error).toBeInstanceOf(DeclineError);
    expect((error as DeclineError).payment).toEqual(declined);
    expect(giveUps).toEqual([]);
  });

  it('any other refusal is a give-up: onGiveUp hears of it, with the answer as the last error', async () => {
    const { client, giveUps } = harness([{ status: 422, body: failure('idempotency_key_reused') }]);

    const { error } = await settle(client.payments.create(PAY, { idempotencyKey: 'k1' }));

    expect(giveUps).toEqual([
      expect.objectContaining({ operation: 'payments.create', method: 'POST', path: '/v1/payments', reason: 'not_retryable', attempts: 1, idempotencyKey: 'k1', lastError: error }),
    ]);
  });
});

describe('202: the operation is not final yet', () => {
  it('is polled with the same key until final; polls are neither retries nor paid from the budget', async () => {
    const pending = payment({ status: 'pending' });
    const { api, client, giveUps } = harness(
      [
        { status: 202, body: pending, headers: { 'retry-after': '1' } },
        { status: 202, body: pending, headers: { 'retry-after': '1' } },
        { status: 202, body: pending, headers: { 'retry-after': '1' } },
        ok(),
      ],
      { maxRetries: 0, retryBudget: { ratio: 0, burst: 1 } },
    );
    const tokens = client.retryBudget!.tokens;

    const { value } = await settle(client.payments.create(PAY));

    expect(value).toMatchObject({ status: 'succeeded' });
    expect(schedule(api)).toEqual([0, 1_000, 2_000, 3_000]);
    expect(new Set(api.requests.map((request) => request.headers.get('idempotency-key'))).size).toBe(1);
    expect(client.retryBudget!.tokens).toBe(tokens);
    expect(giveUps).toEqual([]);
  });

  it('until the deadline: PendingAtDeadlineError carries the pending payment, and onGiveUp says deadline', async () => {
    const pending = payment({ status: 'pending' });
    const { api, client, giveUps } = harness([{ status: 202, body: pending, headers: { 'retry-after': '2' } }], { deadlineMs: 7_000 });

    const { error } = await settle(client.payments.create(PAY));

    // Polls at 0, 2, 4 and 6 s; the next, at 8 s, would be past the deadline, so the call stops at once.
    expect(schedule(api)).toEqual([0, 2_000, 4_000, 6_000]);
    expect(error).toBeInstanceOf(PendingAtDeadlineError);
    expect(error).toMatchObject({ reason: 'deadline', payment: pending, refund: undefined, attempts: 4 });
    expect((error as Error).cause).toBeUndefined();
    expect(giveUps).toEqual([expect.objectContaining({ reason: 'deadline', attempts: 4, lastError: error, elapsedMs: 6_000 })]);
  });

  it('a refund too: PendingAtDeadlineError carries the pending refund', async () => {
    const pending = refund({ status: 'pending' });
    const { client } = harness([{ status: 202, body: pending, headers: { 'retry-after': '60' } }]);

    const { error } = await settle(client.refunds.create({ payment: 'pay_1' }));

    expect(error).toBeInstanceOf(PendingAtDeadlineError);
    expect(error).toMatchObject({ refund: pending, payment: undefined });
  });

  it('a payment in review (Retry-After: 60) stops the call at once: the wait would pass the deadline', async () => {
    const review = payment({ status: 'requires_review' });
    const { api, client, giveUps } = harness([{ status: 202, body: review, headers: { 'retry-after': '60' } }]);

    const { error } = await settle(client.payments.create(PAY));

    expect(api.requests).toHaveLength(1);
    expect(error).toMatchObject({ name: 'PendingAtDeadlineError', reason: 'deadline', payment: review });
    expect(giveUps[0].elapsedMs).toBe(0);
  });

  it('a failure after a 202 that finds no retry left still reports the pending payment, with the failure as cause', async () => {
    const pending = payment({ status: 'pending' });
    const { client, giveUps } = harness([{ status: 202, body: pending }, unavailable], { maxRetries: 1 });

    const { error } = await settle(client.payments.create(PAY));

    expect(error).toBeInstanceOf(PendingAtDeadlineError);
    expect(error).toMatchObject({ reason: 'max_retries', payment: pending, attempts: 3 });
    expect((error as Error).cause).toBeInstanceOf(ApiError);
    expect(giveUps[0]).toMatchObject({ reason: 'max_retries', attempts: 3 });
  });
});

describe('the wait between attempts', () => {
  it('is full jitter: random() times min(cap, base * 2^retry)', async () => {
    const draws = [0.5, 0.25, 0.99, 0, 0.5];
    const { api, client } = harness([unavailable, unavailable, unavailable, unavailable, unavailable, ok()], {
      maxRetries: 5,
      backoff: { baseMs: 100, capMs: 300 },
      random: () => draws.shift()!,
    });

    await settle(client.payments.create(PAY));

    // Ceilings 100, 200, 300 (capped from 400), 300, 300.
    const waits = schedule(api).map((at, index, all) => (index === 0 ? 0 : at - all[index - 1])).slice(1);
    expect(waits).toEqual([50, 50, 297, 0, 150]);
  });

  it('is never shorter than Retry-After in seconds', async () => {
    const { api, client } = harness([{ status: 429, body: failure('rate_limited'), headers: { 'retry-after': '3' } }, ok()]);

    await settle(client.payments.create(PAY));

    expect(schedule(api)).toEqual([0, 3_000]);
  });

  it('is never shorter than Retry-After as an HTTP date', async () => {
    const { api, client } = harness([{ status: 503, body: failure('service_unavailable'), headers: { 'retry-after': 'Sun, 01 Mar 2026 12:00:04 GMT' } }, ok()]);

    await settle(client.payments.create(PAY));

    expect(schedule(api)).toEqual([0, 4_000]);
  });

  it('is the backoff when that is longer: Retry-After is a floor, not the wait', async () => {
    const { api, client } = harness([{ status: 503, headers: { 'retry-after': '0' } }, ok()], { random: () => 0.9 });

    await settle(client.payments.create(PAY));

    expect(schedule(api)).toEqual([0, 90]);
  });

  it('is the backoff when Retry-After cannot be read', async () => {
    const { api, client } = harness([{ status: 503, headers: { 'retry-after': 'Sunday, 01-Mar-26 12:00:04 GMT' } }, ok()]);

    await settle(client.payments.create(PAY));

    expect(schedule(api)).toEqual([0, 50]);
  });
});

describe('one deadline per call', () => {
  it('bounds every attempt and wait together: each attempt waits at most the time left', async () => {
    const { api, client, giveUps } = harness(['hang'], { deadlineMs: 5_000, timeoutMs: 2_000, maxRetries: 10 });

    const { error } = await settle(client.payments.create(PAY));

    // 0–2000 timed out, 50 ms wait, 2050–4050 timed out, 100 ms wait, 4150–5000 cut at the deadline.
    expect(schedule(api)).toEqual([0, 2_050, 4_150]);
    expect(error).toBeInstanceOf(NetworkError);
    expect(error).toMatchObject({ kind: 'timeout' });
    expect(giveUps).toEqual([expect.objectContaining({ reason: 'deadline', attempts: 3, elapsedMs: 5_000 })]);
  });

  it('gives up at once, not after sleeping, when Retry-After is past the deadline', async () => {
    const { api, client, giveUps } = harness([{ status: 503, body: failure('provider_unavailable'), headers: { 'retry-after': '45' } }]);

    const { error } = await settle(client.payments.create(PAY));

    expect(api.requests).toHaveLength(1);
    expect(error).toMatchObject({ status: 503, code: 'provider_unavailable', retryAfterMs: 45_000 });
    expect(giveUps).toEqual([expect.objectContaining({ reason: 'deadline', attempts: 1, elapsedMs: 0 })]);
  });

  it('can be set per call', async () => {
    const { api, client } = harness([{ status: 503, headers: { 'retry-after': '2' } }], { maxRetries: 10 });

    await settle(client.payments.create(PAY, { deadlineMs: 5_000 }));

    expect(schedule(api)).toEqual([0, 2_000, 4_000]);
  });
});

describe('maxRetries', () => {
  it('counts the retries after failures: then the call gives up with the last answer', async () => {
    const { api, client, giveUps } = harness([unavailable], { maxRetries: 4 });

    const { error } = await settle(client.payments.create(PAY));

    expect(api.requests).toHaveLength(5);
    expect(error).toBeInstanceOf(ApiError);
    expect(error).toMatchObject({ status: 503, code: 'service_unavailable', attempts: 5 });
    expect(giveUps).toEqual([expect.objectContaining({ reason: 'max_retries', attempts: 5, lastError: error })]);
  });

  it('0: one attempt only', async () => {
    const { api, client } = harness([{ network: 'ECONNREFUSED' }], { maxRetries: 0 });

    const { error } = await settle(client.payments.create(PAY));

    expect(api.requests).toHaveLength(1);
    expect(error).toMatchObject({ name: 'NetworkError', kind: 'network', message: 'fetch failed: ECONNREFUSED' });
  });
});

describe('the retry budget of a client instance', () => {
  it('starts with `burst` retries, earns `ratio` of one per first attempt, and stops retries when empty', async () => {
    const { api, client, giveUps } = harness([unavailable], { maxRetries: 5, retryBudget: { ratio: 0.5, burst: 2 } });
    const sent = () => api.requests.length;

    await settle(client.payments.create(PAY));
    expect(sent()).toBe(3); // the first attempt (bucket full at 2), then its 2 tokens' retries
    await settle(client.payments.create(PAY));
    expect(sent()).toBe(4); // 0.5 earned: no retry
    await settle(client.payments.create(PAY));
    expect(sent()).toBe(6); // 1 token: one retry

    expect(giveUps.map((info) => [info.reason, info.attempts])).toEqual([
      ['budget_exhausted', 3],
      ['budget_exhausted', 1],
      ['budget_exhausted', 2],
    ]);
  });

  it('is per instance: an exhausted client does not spend another’s', async () => {
    const tired = harness([unavailable], { maxRetries: 3, retryBudget: { ratio: 0, burst: 1 } });
    const fresh = harness([unavailable, ok()], { maxRetries: 3, retryBudget: { ratio: 0, burst: 1 } });

    await settle(tired.client.payments.create(PAY));
    await settle(tired.client.payments.create(PAY));
    const { value } = await settle(fresh.client.payments.create(PAY));

    expect(tired.api.requests).toHaveLength(3);
    expect(value).toMatchObject({ status: 'succeeded' });
  });

  it('holds retries to `ratio` of first attempts plus `burst` over many failing calls', async () => {
    const { api, client } = harness([unavailable], { maxRetries: 3, retryBudget: { ratio: 0.1, burst: 10 } });
    const calls = 200;

    for (let n = 0; n < calls; n++) await settle(client.payments.create(PAY));

    const retries = api.requests.length - calls;
    expect(retries).toBeLessThanOrEqual(0.1 * calls + 10);
    expect(retries).toBeGreaterThanOrEqual(0.1 * calls + 10 - 2);
  });

  it('is paid by GETs as well, and can be turned off', async () => {
    const { api, client } = harness([unavailable], { maxRetries: 2, retryBudget: false });

    for (let n = 0; n < 20; n++) await settle(client.payments.retrieve('pay_1'));

    expect(client.retryBudget).toBeUndefined();
    expect(api.requests).toHaveLength(60);
  });
});

describe('onGiveUp', () => {
  it('is not called for calls that end with an answer', async () => {
    const { client, giveUps } = harness([unavailable, ok()]);

    await settle(client.payments.create(PAY));

    expect(giveUps).toEqual([]);
  });

  it('cannot replace the call’s error by throwing', async () => {
    const api = fakeApi([{ status: 404, body: failure('resource_missing') }]);
    const client = new PaymentsClient({
      baseUrl: 'http://api.test',
      apiKey: 'sk_test',
      fetch: api.fetch,
      onGiveUp: () => {
        throw new Error('hook bug');
      },
    });

    const { error } = await settle(client.payments.retrieve('pay_1'));

    expect(error).toMatchObject({ status: 404, code: 'resource_missing' });
  });

  it('hears of a call the caller aborted, which rejects with the signal’s reason', async () => {
    const { client, giveUps } = harness([unavailable]);
    const controller = new AbortController();

    const call = client.payments.create(PAY, { signal: controller.signal }).catch((error: unknown) => error);
    await jest.advanceTimersByTimeAsync(10); // the first attempt failed; the call waits 50 ms before the next
    controller.abort(new Error('shutting down'));
    const error = await call;

    expect(error).toEqual(new Error('shutting down'));
    expect(giveUps).toEqual([expect.objectContaining({ reason: 'aborted', attempts: 1 })]);
  });

  it('hears of a call aborted while its attempt waits for an answer', async () => {
    const { api, client, giveUps } = harness(['hang']);
    const controller = new AbortController();

    const call = client.payments.retrieve('pay_1', { signal: controller.signal }).catch((error: unknown) => error);
    await jest.advanceTimersByTimeAsync(1_000);
    controller.abort(new Error('user left'));
    const error = await call;

    expect(error).toEqual(new Error('user left'));
    expect(api.requests).toHaveLength(1);
    expect(giveUps).toEqual([expect.objectContaining({ operation: 'payments.retrieve', reason: 'aborted', attempts: 1, elapsedMs: 1_000 })]);
  });
});

describe('list', () => {
  const page = (ids: string[], hasMore: boolean): Answer => ({
    status: 200,
    body: { object: 'list', data: ids.map((id) => payment({ id })), has_more: hasMore },
  });

  it('is an async iterator over the pages, following the cursor, one request per page and only when needed', async () => {
    const { api, client } = harness([page(['pay_5', 'pay_4'], true), page(['pay_3', 'pay_2'], true), page(['pay_1'], false)]);

    const iterator = client.payments.list({ limit: 2 });
    expect(api.requests).toHaveLength(0);
    const ids: string[] = [];
    for await (const listed of iterator) ids.push(listed.id);

    expect(ids).toEqual(['pay_5', 'pay_4', 'pay_3', 'pay_2', 'pay_1']);
    expect(api.requests.map((request) => request.url.pathname + request.url.search)).toEqual([
      '/v1/payments?limit=2',
      '/v1/payments?limit=2&starting_after=pay_4',
      '/v1/payments?limit=2&starting_after=pay_2',
    ]);
  });

  it('stops fetching when the loop stops', async () => {
    const { api, client } = harness([page(['pay_5', 'pay_4'], true)]);

    for await (const listed of client.payments.list({ limit: 2 })) if (listed.id === 'pay_5') break;

    expect(api.requests).toHaveLength(1);
  });

  it('retries a page like any call', async () => {
    const { api, client } = harness([unavailable, page(['pay_1'], false)]);

    const ids: string[] = [];
    const loop = (async () => {
      for await (const listed of client.payments.list()) ids.push(listed.id);
    })();
    await settle(loop);

    expect(ids).toEqual(['pay_1']);
    expect(api.requests).toHaveLength(2);
  });

  it('events.list passes the type, refunds.list the payment, and both start after a given cursor', async () => {
    const { api, client } = harness([{ status: 200, body: { object: 'list', data: [], has_more: false } }]);

    for await (const _ of client.events.list({ type: 'payment.succeeded', starting_after: 'evt_9' })) throw new Error('no events');
    for await (const _ of client.refunds.list({ payment: 'pay_1', limit: 100 })) throw new Error('no refunds');

    expect(api.requests.map((request) => request.url.pathname + request.url.search)).toEqual([
      '/v1/events?type=payment.succeeded&starting_after=evt_9',
      '/v1/refunds?payment=pay_1&limit=100',
    ]);
  });
});

describe('the options', () => {
  it.each<[string, Partial<PaymentsClientOptions>]>([
    ['a bad baseUrl', { baseUrl: 'not a url' }],
    ['no apiKey', { apiKey: '' }],
    ['a negative maxRetries', { maxRetries: -1 }],
    ['a zero deadline', { deadlineMs: 0 }],
    ['a budget without burst', { retryBudget: { ratio: 0.1, burst: 0 } }],
    ['a ratio above 1', { retryBudget: { ratio: 2, burst: 10 } }],
    ['a cap below the base', { backoff: { baseMs: 100, capMs: 10 } }],
  ])('refuse %s', (_case, options) => {
    expect(() => new PaymentsClient({ baseUrl: 'http://api.test', apiKey: 'sk_test', ...options })).toThrow();
  });
});
