import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Webhook } from 'standardwebhooks';
import { type Charge, type ProviderProcess, startProvider } from './support/processes';
import type { ProviderEvent, Refund } from '../src/mock-provider/mock-provider.types';
import { eventually } from './support/eventually';

jest.setTimeout(30_000);

const newKey = () => `key_${randomUUID()}`;

type PostInit = { signal?: AbortSignal; headers?: Record<string, string> };

const postCharge = (provider: ProviderProcess, key: string | undefined, body: Record<string, unknown>, init?: PostInit) =>
  post(provider, '/charges', key, body, init);

const postRefund = (provider: ProviderProcess, key: string | undefined, body: Record<string, unknown>, init?: PostInit) =>
  post(provider, '/refunds', key, body, init);

function post(
  provider: ProviderProcess,
  path: '/charges' | '/refunds',
  key: string | undefined,
  body: Record<string, unknown>,
  init: PostInit = {},
): Promise<Response> {
  return fetch(`${provider.url}${path}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(key === undefined ? {} : { 'idempotency-key': key }),
      ...init.headers,
    },
    body: JSON.stringify(body),
    signal: init.signal,
  });
}

const chargeBody = (paymentMethod: string, overrides: Record<string, unknown> = {}) => ({
  amount: 1000,
  currency: 'EUR',
  payment_method: paymentMethod,
  reference: `pay_${randomUUID()}`,
  ...overrides,
});

const getCharge = (provider: ProviderProcess, key: string) =>
  fetch(`${provider.url}/charges/${encodeURIComponent(key)}`);

const getRefund = (provider: ProviderProcess, key: string) =>
  fetch(`${provider.url}/refunds/${encodeURIComponent(key)}`);

const listRefunds = async (provider: ProviderProcess) => (await (await fetch(`${provider.url}/refunds`)).json()) as Refund[];

/** A charge made with `paymentMethod` (1000 EUR), and the body of a refund of it. */
async function charged(provider: ProviderProcess, paymentMethod: string) {
  const charge = (await (await postCharge(provider, newKey(), chargeBody(paymentMethod))).json()) as Charge;
  const refundBody = (overrides: Record<string, unknown> = {}) => ({
    charge: charge.id,
    amount: 400,
    reference: `re_${randomUUID()}`,
    ...overrides,
  });
  return { charge, refundBody };
}

describe('mock provider (spawned process)', () => {
  const SLOW_REPLY_MS = 300;
  let provider: ProviderProcess;

  beforeAll(async () => {
    provider = await startProvider({
      PROVIDER_WEBHOOK_URL: '',
      LOG_LEVEL: 'info',
      PROVIDER_SLOW_REPLY_MS: String(SLOW_REPLY_MS),
      PROVIDER_PENDING_SETTLE_MS: '1000',
    });
  });

  afterAll(async () => {
    await provider?.stop();
  });

  it('answers GET /health', async () => {
    const response = await fetch(`${provider.url}/health`);

    expect(response.status).toBe(200);
  });

  it('pm_card_ok: 201 with the charge, readable and replayed as is', async () => {
    const key = newKey();
    const body = chargeBody('pm_card_ok');

    const created = await postCharge(provider, key, body);
    const charge = (await created.json()) as Charge;
    const read = await getCharge(provider, key);
    const replay = await postCharge(provider, key, body);

    expect(created.status).toBe(201);
    expect(charge).toEqual({
      id: expect.stringMatching(/^ch_/),
      status: 'succeeded',
      amount: 1000,
      currency: 'EUR',
      failure_code: null,
      reference: body.reference,
      idempotency_key: key,
      created_at: expect.any(String),
    });
    expect(read.status).toBe(200);
    expect(await read.json()).toEqual(charge);
    expect(replay.status).toBe(201);
    expect(await replay.json()).toEqual(charge);
    const held = (await provider.charges()).filter((each) => each.idempotency_key === key);
    expect(held).toEqual([charge]);
  });

  it('answers 422 for a key reused with other parameters, keeping the first charge', async () => {
    const key = newKey();
    const body = chargeBody('pm_card_ok');
    const first = (await (await postCharge(provider, key, body)).json()) as Charge;

    const reused = await postCharge(provider, key, { ...body, amount: 2000 });

    expect(reused.status).toBe(422);
    expect(await reused.json()).toEqual({
      error: { code: 'idempotency_key_reused', message: expect.any(String) },
    });
    expect(await (await getCharge(provider, key)).json()).toEqual(first);
  });

  it.each<[string, boolean, Record<string, unknown>, string]>([
    ['no Idempotency-Key', false, {}, 'idempotency_key_missing'],
    ['an unknown field', true, { capture: true }, 'parameter_unknown'],
    ['a lower-case currency', true, { currency: 'eur' }, 'parameter_invalid'],
    ['a fractional amount', true, { amount: 10.5 }, 'parameter_invalid'],
    ['an amount as a string', true, { amount: '1000' }, 'parameter_invalid'],
    ['an empty reference', true, { reference: '' }, 'parameter_invalid'],
  ])('answers 400 for %s and records nothing', async (_case, withKey, change, code) => {
    const before = await provider.charges();

    const response = await postCharge(
      provider,
      withKey ? newKey() : undefined,
      chargeBody('pm_card_ok', change),
    );

    expect(response.status).toBe(400);
    expect(await response.json()).toEqual({ error: { code, message: expect.any(String) } });
    expect(await provider.charges()).toEqual(before);
  });

  it('answers 404 charge_not_found for a key never received', async () => {
    const response = await getCharge(provider, newKey());

    expect(response.status).toBe(404);
    expect(await response.json()).toEqual({
      error: { code: 'charge_not_found', message: expect.any(String) },
    });
  });

  it('pm_card_declined: records a failed charge with card_declined', async () => {
    const key = newKey();

    const response = await postCharge(provider, key, chargeBody('pm_card_declined'));

    expect(response.status).toBe(201);
    expect(await response.json()).toMatchObject({
      status: 'failed',
      failure_code: 'card_declined',
    });
    expect(await (await getCharge(provider, key)).json()).toMatchObject({ status: 'failed' });
  });

  it('pm_card_lost_response: the connection drops, yet the charge is recorded', async () => {
    const key = newKey();
    const body = chargeBody('pm_card_lost_response');

    const lost: unknown = await postCharge(provider, key, body).catch((error: unknown) => error);
    const read = await getCharge(provider, key);
    const recorded = (await read.json()) as Charge;
    const retry = await postCharge(provider, key, body);

    // fetch's errors come from another realm than jest's, so match on shape, not class.
    expect(lost).toMatchObject({ message: 'fetch failed', cause: { code: 'UND_ERR_SOCKET' } });
    expect(read.status).toBe(200);
    expect(recorded.status).toBe('succeeded');
    expect(retry.status).toBe(201);
    expect(await retry.json()).toEqual(recorded);
  });

  it('pm_card_timeout: the first reply outlasts the client timeout, yet is recorded', async () => {
    const key = newKey();
    const body = chargeBody('pm_card_timeout');

    const timedOut: unknown = await postCharge(provider, key, body, {
      signal: AbortSignal.timeout(100),
    }).catch((error: unknown) => error);
    const read = await getCharge(provider, key);
    const recorded = (await read.json()) as Charge;
    const started = Date.now();
    const retry = await postCharge(provider, key, body);

    expect((timedOut as Error).name).toBe('TimeoutError');
    expect(read.status).toBe(200);
    expect(recorded.status).toBe('succeeded');
    expect(retry.status).toBe(201);
    expect(await retry.json()).toEqual(recorded);
    expect(Date.now() - started).toBeLessThan(SLOW_REPLY_MS);
  });

  it('pm_card_flaky: 503 twice without recording, then 201', async () => {
    const key = newKey();
    const body = chargeBody('pm_card_flaky');
    const statuses: number[] = [];
    const readStatuses: number[] = [];

    for (let call = 0; call < 3; call++) {
      statuses.push((await postCharge(provider, key, body)).status);
      readStatuses.push((await getCharge(provider, key)).status);
    }

    expect(statuses).toEqual([503, 503, 201]);
    expect(readStatuses).toEqual([404, 404, 200]);
  });

  it('pm_card_rate_limited: 429 with Retry-After: 1 without recording, then 201', async () => {
    const key = newKey();
    const body = chargeBody('pm_card_rate_limited');

    const limited = await postCharge(provider, key, body);
    const readAfterLimit = await getCharge(provider, key);
    const retry = await postCharge(provider, key, body);

    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).toBe('1');
    expect(await limited.json()).toEqual({
      error: { code: 'rate_limited', message: expect.any(String) },
    });
    expect(readAfterLimit.status).toBe(404);
    expect(retry.status).toBe(201);
    expect(await retry.json()).toMatchObject({ status: 'succeeded' });
  });

  it('pm_card_unavailable: always 503, never recorded', async () => {
    const key = newKey();
    const body = chargeBody('pm_card_unavailable');
    const statuses: number[] = [];

    for (let call = 0; call < 4; call++) {
      statuses.push((await postCharge(provider, key, body)).status);
    }

    expect(statuses).toEqual([503, 503, 503, 503]);
    expect((await getCharge(provider, key)).status).toBe(404);
    expect((await provider.charges()).some((held) => held.idempotency_key === key)).toBe(false);
  });

  it('pm_card_pending: pending at first, then succeeded', async () => {
    const key = newKey();

    const response = await postCharge(provider, key, chargeBody('pm_card_pending'));
    const created = (await response.json()) as Charge;
    const settled = await eventually(
      async () => {
        const charge = (await (await getCharge(provider, key)).json()) as Charge;
        return charge.status === 'succeeded' ? charge : undefined;
      },
      { what: 'the pending charge to settle' },
    );

    expect(created.status).toBe('pending');
    expect(settled).toEqual({ ...created, status: 'succeeded' });
  });

  it('any other payment method: a definitive failure with payment_method_unknown', async () => {
    const response = await postCharge(provider, newKey(), chargeBody('pm_card_visa'));

    expect(response.status).toBe(201);
    expect(await response.json()).toMatchObject({
      status: 'failed',
      failure_code: 'payment_method_unknown',
    });
  });

  it('records exactly one charge for 50 concurrent POSTs with one key', async () => {
    const key = newKey();
    const body = chargeBody('pm_card_ok');

    const responses = await Promise.all(
      Array.from({ length: 50 }, () => postCharge(provider, key, body)),
    );
    const charges = (await Promise.all(responses.map((response) => response.json()))) as Charge[];
    const held = (await provider.charges()).filter((charge) => charge.idempotency_key === key);

    expect(responses.map((response) => response.status)).toEqual(Array(50).fill(201));
    expect(held).toHaveLength(1);
    expect(new Set(charges.map((charge) => charge.id))).toEqual(new Set([held[0]!.id]));
  });

  it('with PROVIDER_WEBHOOK_URL empty, records and lists each event without delivering it', async () => {
    const key = newKey();
    const charge = (await (await postCharge(provider, key, chargeBody('pm_card_declined'))).json()) as Charge;

    const listed = (await provider.events()).filter((event) => event.data.provider_key === key);

    expect(listed).toEqual([
      {
        id: expect.stringMatching(/^evt_/),
        type: 'charge.failed',
        created_at: expect.any(String),
        data: { ...charge, provider_key: key, version: 1 },
        delivered: false,
        attempts: 0,
      },
    ]);
  });

  it('logs the incoming X-Request-Id with the request', async () => {
    const requestId = `req_${randomUUID()}`;

    await postCharge(provider, newKey(), chargeBody('pm_card_ok'), {
      headers: { 'x-request-id': requestId },
    });

    const loggedAsRequestId = (line: string) =>
      line.includes(requestId) &&
      (JSON.parse(line) as { req?: { id?: string } }).req?.id === requestId;
    await eventually(async () => (provider.output().some(loggedAsRequestId) ? true : undefined), {
      what: 'a log line with the request id',
    });
  });
});

describe('mock provider refunds (spawned process)', () => {
  const SLOW_REPLY_MS = 300;
  const SETTLE_MS = 1_000;
  let provider: ProviderProcess;

  beforeAll(async () => {
    provider = await startProvider({
      PROVIDER_WEBHOOK_URL: '',
      PROVIDER_SLOW_REPLY_MS: String(SLOW_REPLY_MS),
      PROVIDER_PENDING_SETTLE_MS: String(SETTLE_MS),
    });
  });

  afterAll(async () => {
    await provider?.stop();
  });

  const refundError = async (response: Response) => ({ status: response.status, body: (await response.json()) as unknown });
  const error = (status: number, code: string) => ({ status, body: { error: { code, message: expect.any(String) } } });

  it('pm_card_ok: 201 with the refund object, readable, listed and replayed as is', async () => {
    const { charge, refundBody } = await charged(provider, 'pm_card_ok');
    const key = newKey();
    const body = refundBody();

    const created = await postRefund(provider, key, body);
    const refund = (await created.json()) as Refund;
    const read = await getRefund(provider, key);
    const replay = await postRefund(provider, key, body);

    expect(created.status).toBe(201);
    expect(refund).toEqual({
      id: expect.stringMatching(/^rf_[0-9A-Z]{26}$/),
      object: 'refund',
      charge: charge.id,
      amount: 400,
      currency: 'EUR',
      status: 'succeeded',
      failure_code: null,
      reference: body.reference,
      idempotency_key: key,
      created_at: expect.any(String),
    });
    expect(read.status).toBe(200);
    expect(await read.json()).toEqual(refund);
    expect(replay.status).toBe(201);
    expect(await replay.json()).toEqual(refund);
    expect((await listRefunds(provider)).filter((each) => each.idempotency_key === key)).toEqual([refund]);
  });

  it('answers 422 idempotency_key_reused for a key reused with other parameters, keeping the first refund', async () => {
    const { refundBody } = await charged(provider, 'pm_card_ok');
    const key = newKey();
    const body = refundBody();
    const first = (await (await postRefund(provider, key, body)).json()) as Refund;

    const reused = await postRefund(provider, key, { ...body, amount: 300 });

    expect(await refundError(reused)).toEqual(error(422, 'idempotency_key_reused'));
    expect(await (await getRefund(provider, key)).json()).toEqual(first);
  });

  it('answers 422 amount_too_large past what the refunds that did not fail leave of the charge', async () => {
    const { charge, refundBody } = await charged(provider, 'pm_card_ok');
    await postRefund(provider, newKey(), refundBody({ amount: 600 }));

    const tooLarge = await postRefund(provider, newKey(), refundBody({ amount: 401 }));
    const rest = await postRefund(provider, newKey(), refundBody({ amount: 400 }));

    expect(await refundError(tooLarge)).toEqual(error(422, 'amount_too_large'));
    expect(rest.status).toBe(201);
    const ofCharge = (await listRefunds(provider)).filter((each) => each.charge === charge.id);
    expect(ofCharge.map((each) => each.amount)).toEqual([600, 400]);
  });

  it('answers 422 charge_not_refundable for a charge that has not succeeded, 404 charge_not_found for none', async () => {
    const declined = await charged(provider, 'pm_card_declined');
    const pending = await charged(provider, 'pm_card_pending');
    const before = await listRefunds(provider);

    const ofDeclined = await postRefund(provider, newKey(), declined.refundBody());
    const ofPending = await postRefund(provider, newKey(), pending.refundBody());
    const ofNone = await postRefund(provider, newKey(), declined.refundBody({ charge: 'ch_never_made' }));

    expect(await refundError(ofDeclined)).toEqual(error(422, 'charge_not_refundable'));
    expect(await refundError(ofPending)).toEqual(error(422, 'charge_not_refundable'));
    expect(await refundError(ofNone)).toEqual(error(404, 'charge_not_found'));
    expect(await listRefunds(provider)).toEqual(before);
  });

  it.each<[string, boolean, Record<string, unknown>, string]>([
    ['no Idempotency-Key', false, {}, 'idempotency_key_missing'],
    ['an unknown field', true, { currency: 'EUR' }, 'parameter_unknown'],
    ['no charge', true, { charge: undefined }, 'parameter_invalid'],
    ['an amount of 0', true, { amount: 0 }, 'parameter_invalid'],
    ['an amount as a string', true, { amount: '400' }, 'parameter_invalid'],
    ['an empty reference', true, { reference: '' }, 'parameter_invalid'],
  ])('answers 400 for %s and records nothing', async (_case, withKey, change, code) => {
    const { refundBody } = await charged(provider, 'pm_card_ok');
    const before = await listRefunds(provider);

    const response = await postRefund(provider, withKey ? newKey() : undefined, refundBody(change));

    expect(await refundError(response)).toEqual(error(400, code));
    expect(await listRefunds(provider)).toEqual(before);
  });

  it('answers 404 refund_not_found for a key never received', async () => {
    expect(await refundError(await getRefund(provider, newKey()))).toEqual(error(404, 'refund_not_found'));
  });

  it('pm_card_refund_fails: the charge succeeds, its refund fails with refund_declined and gives the amount back', async () => {
    const { charge, refundBody } = await charged(provider, 'pm_card_refund_fails');

    const refund = await postRefund(provider, newKey(), refundBody({ amount: 1000 }));
    const again = await postRefund(provider, newKey(), refundBody({ amount: 1000 }));

    expect(charge.status).toBe('succeeded');
    expect(refund.status).toBe(201);
    expect(await refund.json()).toMatchObject({ status: 'failed', failure_code: 'refund_declined' });
    expect(again.status).toBe(201);
  });

  it('pm_card_refund_lost_response: the connection drops, yet the refund is recorded and replayed', async () => {
    const { refundBody } = await charged(provider, 'pm_card_refund_lost_response');
    const key = newKey();
    const body = refundBody();

    const lost: unknown = await postRefund(provider, key, body).catch((thrown: unknown) => thrown);
    const recorded = (await (await getRefund(provider, key)).json()) as Refund;
    const retry = await postRefund(provider, key, body);

    expect(lost).toMatchObject({ message: 'fetch failed', cause: { code: 'UND_ERR_SOCKET' } });
    expect(recorded.status).toBe('succeeded');
    expect(retry.status).toBe(201);
    expect(await retry.json()).toEqual(recorded);
  });

  it('pm_card_refund_timeout: the first reply outlasts the client timeout, yet the refund is recorded', async () => {
    const { refundBody } = await charged(provider, 'pm_card_refund_timeout');
    const key = newKey();
    const body = refundBody();

    const timedOut: unknown = await postRefund(provider, key, body, { signal: AbortSignal.timeout(100) }).catch(
      (thrown: unknown) => thrown,
    );
    const recorded = (await (await getRefund(provider, key)).json()) as Refund;
    const started = Date.now();
    const retry = await postRefund(provider, key, body);

    expect((timedOut as Error).name).toBe('TimeoutError');
    expect(recorded.status).toBe('succeeded');
    expect(retry.status).toBe(201);
    expect(await retry.json()).toEqual(recorded);
    expect(Date.now() - started).toBeLessThan(SLOW_REPLY_MS);
  });

  it('pm_card_refund_pending: pending at first, then succeeded', async () => {
    const { refundBody } = await charged(provider, 'pm_card_refund_pending');
    const key = newKey();

    const created = (await (await postRefund(provider, key, refundBody())).json()) as Refund;
    const settled = await eventually(
      async () => {
        const refund = (await (await getRefund(provider, key)).json()) as Refund;
        return refund.status === 'succeeded' ? refund : undefined;
      },
      { what: 'the refund to settle' },
    );

    expect(created.status).toBe('pending');
    expect(settled).toEqual({ ...created, status: 'succeeded' });
  });

  it('records exactly one refund for 20 concurrent POSTs with one key, and never more than the charge', async () => {
    const { charge, refundBody } = await charged(provider, 'pm_card_ok');
    const key = newKey();
    const body = refundBody({ amount: 300 });

    const sameKey = await Promise.all(Array.from({ length: 20 }, () => postRefund(provider, key, body)));
    const otherKeys = await Promise.all(
      Array.from({ length: 5 }, () => postRefund(provider, newKey(), refundBody({ amount: 300 }))),
    );

    expect(new Set(await Promise.all(sameKey.map(async (response) => ((await response.json()) as Refund).id))).size).toBe(1);
    expect(otherKeys.map((response) => response.status).sort()).toEqual([201, 201, 422, 422, 422]);
    const ofCharge = (await listRefunds(provider)).filter((each) => each.charge === charge.id);
    expect(ofCharge.reduce((sum, each) => sum + each.amount, 0)).toBe(900);
  });
});

describe('mock provider restarts', () => {
  let dir: string;
  const running: ProviderProcess[] = [];

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'mock-provider-e2e-'));
  });

  afterAll(async () => {
    await Promise.all(running.map((provider) => provider.stop()));
    rmSync(dir, { recursive: true, force: true });
  });

  const start = async (env: Record<string, string>) => {
    const provider = await startProvider({ PROVIDER_WEBHOOK_URL: '', ...env });
    running.push(provider);
    return provider;
  };

  it('keeps its charges across a crash with PROVIDER_DATA_FILE, and replays them', async () => {
    const env = {
      PROVIDER_DATA_FILE: join(dir, 'charges.jsonl'),
      PROVIDER_PENDING_SETTLE_MS: '600000',
    };
    const first = await start(env);
    const key = newKey();
    const body = chargeBody('pm_card_ok');
    await postCharge(first, key, body);
    await postCharge(first, newKey(), chargeBody('pm_card_declined'));
    await postCharge(first, newKey(), chargeBody('pm_card_pending'));
    const before = await first.charges();

    await first.kill();
    const second = await start(env);
    const replay = await postCharge(second, key, body);

    expect(before).toHaveLength(3);
    expect(await second.charges()).toEqual(before);
    expect(replay.status).toBe(201);
    expect(await replay.json()).toEqual(before[0]);
  });

  it('keeps its refunds across a crash with PROVIDER_DATA_FILE, and replays them', async () => {
    const env = { PROVIDER_DATA_FILE: join(dir, 'refunds.jsonl'), PROVIDER_PENDING_SETTLE_MS: '600000' };
    const first = await start(env);
    const { charge, refundBody } = await charged(first, 'pm_card_refund_pending');
    const key = newKey();
    const body = refundBody({ amount: 600 });
    await postRefund(first, key, body);
    const before = await listRefunds(first);

    await first.kill();
    const second = await start(env);
    const replay = await postRefund(second, key, body);
    const tooLarge = await postRefund(second, newKey(), refundBody({ amount: 401 }));

    expect(before).toEqual([expect.objectContaining({ charge: charge.id, status: 'pending', idempotency_key: key })]);
    expect(await listRefunds(second)).toEqual(before);
    expect(replay.status).toBe(201);
    expect(await replay.json()).toEqual(before[0]);
    expect(tooLarge.status).toBe(422);
  });

  it('forgets its charges on restart without PROVIDER_DATA_FILE', async () => {
    const first = await start({});
    const key = newKey();
    await postCharge(first, key, chargeBody('pm_card_ok'));

    await first.kill();
    const second = await start({});

    expect((await getCharge(second, key)).status).toBe(404);
  });

  it('answers in-flight requests on SIGTERM, then exits 0', async () => {
    const provider = await start({ PROVIDER_SLOW_REPLY_MS: '1000' });
    const key = newKey();
    const inFlight = postCharge(provider, key, chargeBody('pm_card_timeout'));
    await eventually(async () => ((await getCharge(provider, key)).status === 200 ? true : undefined), {
      what: 'the charge to be recorded',
    });

    const exit = await provider.stop();
    const response = await inFlight;

    expect(exit).toEqual({ code: 0, signal: null });
    expect(response.status).toBe(201);
    expect(await response.json()).toMatchObject({ idempotency_key: key, status: 'succeeded' });
    await expect(fetch(`${provider.url}/health`)).rejects.toThrow();
  });
});

describe('mock provider with PROVIDER_FAILURE_RATE=1 and PROVIDER_LATENCY_MS', () => {
  const LATENCY_MS = 200;
  let provider: ProviderProcess;

  beforeAll(async () => {
    provider = await startProvider({
      PROVIDER_WEBHOOK_URL: '',
      PROVIDER_FAILURE_RATE: '1',
      PROVIDER_LATENCY_MS: String(LATENCY_MS),
    });
  });

  afterAll(async () => {
    await provider?.stop();
  });

  it('POST /charges is 503 after the latency, and nothing is recorded', async () => {
    const key = newKey();
    const started = Date.now();

    const response = await postCharge(provider, key, chargeBody('pm_card_ok'));

    expect(Date.now() - started).toBeGreaterThanOrEqual(LATENCY_MS - 1);
    expect(response.status).toBe(503);
    expect(await response.json()).toEqual({
      error: { code: 'service_unavailable', message: expect.any(String) },
    });
    expect(await provider.charges()).toEqual([]);
  });

  it('POST /refunds and GET /refunds/:key are 503 after the latency, recording nothing; GET /refunds is spared', async () => {
    const started = Date.now();

    const created = await postRefund(provider, newKey(), { charge: 'ch_1', amount: 100, reference: 're_1' });
    const read = await getRefund(provider, newKey());
    const list = await fetch(`${provider.url}/refunds`);

    expect(Date.now() - started).toBeGreaterThanOrEqual(2 * LATENCY_MS - 1);
    expect(created.status).toBe(503);
    expect(await created.json()).toEqual({ error: { code: 'service_unavailable', message: expect.any(String) } });
    expect(read.status).toBe(503);
    expect(list.status).toBe(200);
    expect(await list.json()).toEqual([]);
  });

  it('GET /charges/:key is 503; GET /charges and /health are spared', async () => {
    const read = await getCharge(provider, newKey());
    const list = await fetch(`${provider.url}/charges`);
    const health = await fetch(`${provider.url}/health`);

    expect(read.status).toBe(503);
    expect(list.status).toBe(200);
    expect(health.status).toBe(200);
  });
});

describe('mock provider with PROVIDER_POISON_RATE=1', () => {
  let provider: ProviderProcess;

  beforeAll(async () => {
    provider = await startProvider({ PROVIDER_WEBHOOK_URL: '', PROVIDER_POISON_RATE: '1' });
  });

  afterAll(async () => {
    await provider?.stop();
  });

  it('poisons the 2xx answer of a refund, yet records the refund as usual', async () => {
    await postCharge(provider, newKey(), chargeBody('pm_card_ok'));
    const [charge] = await provider.charges();
    const key = newKey();

    const answer = await postRefund(provider, key, { charge: charge!.id, amount: 100, reference: 're_1' });
    const text = await answer.text();
    const [recorded] = await listRefunds(provider);

    expect(answer.status).toBe(201);
    expect(recorded).toMatchObject({ idempotency_key: key, status: 'succeeded', amount: 100 });
    expect(text).not.toBe(JSON.stringify(recorded));
  });
});

/** One POST the receiver got, with the status it answered. */
interface Delivery {
  headers: Record<string, string>;
  body: string;
  event: ProviderEvent;
  status: number;
}

/**
 * A webhook receiver on 127.0.0.1 in the test process. `answer` picks each
 * reply's status, given the deliveries of that event id so far (this one included).
 */
async function startReceiver() {
  const deliveries: Delivery[] = [];
  const receiver = {
    url: '',
    deliveries,
    answer: (_sameId: Delivery[]): number => 200,
    of: (key: string) => deliveries.filter((delivery) => delivery.event.data.provider_key === key),
    close: () => new Promise<void>((done) => server.close(() => done())),
  };
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const headers = Object.fromEntries(
        Object.entries(request.headers).map(([name, value]) => [name, String(value)]),
      );
      const delivery: Delivery = { headers, body, event: JSON.parse(body) as ProviderEvent, status: 0 };
      deliveries.push(delivery);
      delivery.status = receiver.answer(deliveries.filter((each) => each.event.id === delivery.event.id));
      response.writeHead(delivery.status).end();
    });
  });
  await new Promise<void>((listening) => server.listen(0, '127.0.0.1', listening));
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/provider/events`;
  return receiver;
}

const newWebhookSecret = () => `whsec_${randomBytes(32).toString('base64')}`;

const summary = (events: { type: string; data: { version: number } }[]) =>
  events.map((event) => `${event.type} v${event.data.version}`);

/** Once `count` deliveries of `key` were acknowledged, and the provider journaled it. */
const acknowledged = (receiver: Awaited<ReturnType<typeof startReceiver>>, key: string, count: number) =>
  eventually(
    () => {
      const done = receiver.of(key).filter((delivery) => delivery.status === 200);
      return done.length >= count ? done : undefined;
    },
    { what: `${count} acknowledged deliveries for ${key}` },
  );

describe('mock provider events (spawned process, real receiver)', () => {
  const SETTLE_MS = 1_000;
  const secret = newWebhookSecret();
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let provider: ProviderProcess;

  beforeAll(async () => {
    receiver = await startReceiver();
    provider = await startProvider({
      PROVIDER_WEBHOOK_URL: receiver.url,
      PROVIDER_WEBHOOK_SECRET: secret,
      PROVIDER_PENDING_SETTLE_MS: String(SETTLE_MS),
    });
  });

  afterEach(() => {
    receiver.answer = () => 200;
  });

  afterAll(async () => {
    await provider?.stop();
    await receiver?.close();
  });

  it('emits one signed event per change, versions growing; a pending charge settles by itself', async () => {
    const [ok, declined, pending] = [newKey(), newKey(), newKey()];
    const charges = new Map<string, Charge>();
    for (const [key, method] of [
      [ok, 'pm_card_ok'],
      [declined, 'pm_card_declined'],
      [pending, 'pm_card_pending'],
    ] as const) {
      charges.set(key, (await (await postCharge(provider, key, chargeBody(method))).json()) as Charge);
    }

    // Nobody reads the pending charge: its settle must come from the provider's own timer.
    await acknowledged(receiver, pending, 2);
    await acknowledged(receiver, ok, 1);
    await acknowledged(receiver, declined, 1);

    const all = [ok, declined, pending].flatMap((key) => receiver.of(key));
    for (const { headers, body, event } of all) {
      expect(new Webhook(secret).verify(body, headers)).toEqual(event);
      expect(headers['content-type']).toBe('application/json');
      expect(headers['webhook-id']).toBe(event.id);
      expect(Math.abs(Number(headers['webhook-timestamp']) - Date.now() / 1000)).toBeLessThan(60);
    }
    const dataOf = (key: string, version: number) => ({ ...charges.get(key)!, provider_key: key, version });
    expect(receiver.of(ok).map((delivery) => delivery.event)).toEqual([
      {
        id: expect.stringMatching(/^evt_/),
        type: 'charge.succeeded',
        created_at: expect.any(String),
        data: dataOf(ok, 1),
      },
    ]);
    expect(summary(receiver.of(declined).map((delivery) => delivery.event))).toEqual(['charge.failed v1']);
    const [created, settled] = receiver
      .of(pending)
      .map((delivery) => delivery.event)
      .sort((a, b) => a.data.version - b.data.version);
    expect(created!.data).toEqual(dataOf(pending, 1));
    expect(created!.type).toBe('charge.pending');
    expect(settled!.data).toEqual({ ...dataOf(pending, 2), status: 'succeeded' });
    expect(settled!.type).toBe('charge.succeeded');
    expect(settled!.id).not.toBe(created!.id);
    const settlesAt = Date.parse(charges.get(pending)!.created_at) + SETTLE_MS;
    expect(Date.parse(settled!.created_at)).toBeGreaterThanOrEqual(settlesAt);
  });

  it('emits signed refund events under the refund key, versions growing; a pending refund settles by itself', async () => {
    const ok = await charged(provider, 'pm_card_ok');
    const fails = await charged(provider, 'pm_card_refund_fails');
    const pending = await charged(provider, 'pm_card_refund_pending');
    const [okKey, failsKey, pendingKey] = [newKey(), newKey(), newKey()];
    const refunds = new Map<string, Refund>();
    for (const [key, refundBody] of [
      [okKey, ok.refundBody],
      [failsKey, fails.refundBody],
      [pendingKey, pending.refundBody],
    ] as const) {
      refunds.set(key, (await (await postRefund(provider, key, refundBody())).json()) as Refund);
    }

    await acknowledged(receiver, pendingKey, 2);
    await acknowledged(receiver, okKey, 1);
    await acknowledged(receiver, failsKey, 1);

    for (const { headers, body, event } of [okKey, failsKey, pendingKey].flatMap((key) => receiver.of(key))) {
      expect(new Webhook(secret).verify(body, headers)).toEqual(event);
      expect(headers['webhook-id']).toBe(event.id);
    }
    const dataOf = (key: string, version: number) => ({ ...refunds.get(key)!, provider_key: key, version });
    expect(receiver.of(okKey).map((delivery) => delivery.event)).toEqual([
      { id: expect.stringMatching(/^evt_/), type: 'refund.succeeded', created_at: expect.any(String), data: dataOf(okKey, 1) },
    ]);
    expect(receiver.of(failsKey).map((delivery) => delivery.event.data)).toEqual([
      { ...dataOf(failsKey, 1), status: 'failed', failure_code: 'refund_declined' },
    ]);
    const pendingEvents = receiver
      .of(pendingKey)
      .map((delivery) => delivery.event)
      .sort((a, b) => a.data.version - b.data.version);
    expect(summary(pendingEvents)).toEqual(['refund.pending v1', 'refund.succeeded v2']);
    expect(pendingEvents[1]!.data).toEqual({ ...dataOf(pendingKey, 2), status: 'succeeded' });
    expect(pendingEvents[0]!.data.reference).toBe(refunds.get(pendingKey)!.reference);
    const listed = await eventually(
      async () => {
        const ours = (await provider.events()).filter((event) => event.data.provider_key === pendingKey);
        return ours.length === 2 && ours.every((event) => event.delivered) ? ours : undefined;
      },
      { what: 'the refund events listed as delivered' },
    );
    expect(listed).toEqual(pendingEvents.map((event) => ({ ...event, delivered: true, attempts: 1 })));
  });

  it('redelivers an event, with the same webhook-id, until the receiver answers 2xx', async () => {
    const key = newKey();
    receiver.answer = (sameId) => (sameId.length <= 3 ? 500 : 200);

    await postCharge(provider, key, chargeBody('pm_card_ok'));
    await acknowledged(receiver, key, 1);
    const listed = await eventually(
      async () => (await provider.events()).find((event) => event.data.provider_key === key && event.delivered),
      { what: 'the event to be listed as delivered' },
    );

    const deliveries = receiver.of(key);
    expect(deliveries.map((delivery) => delivery.status)).toEqual([500, 500, 500, 200]);
    expect(new Set(deliveries.map((delivery) => delivery.headers['webhook-id']))).toEqual(new Set([listed.id]));
    expect(new Set(deliveries.map((delivery) => delivery.body)).size).toBe(1);
    for (const { headers, body } of deliveries) expect(() => new Webhook(secret).verify(body, headers)).not.toThrow();
    expect(listed).toMatchObject({ delivered: true, attempts: 4 });
  });

  it('GET /events lists every event as sent, oldest first, with its delivery state', async () => {
    const [first, second] = [newKey(), newKey()];
    await postCharge(provider, first, chargeBody('pm_card_ok'));
    await postCharge(provider, second, chargeBody('pm_card_declined'));
    await acknowledged(receiver, first, 1);
    await acknowledged(receiver, second, 1);

    const listed = await eventually(
      async () => {
        const events = await provider.events();
        const ours = events.filter((event) => [first, second].includes(event.data.provider_key));
        return ours.length === 2 && ours.every((event) => event.delivered) ? { events, ours } : undefined;
      },
      { what: 'both events listed as delivered' },
    );

    const sent = [first, second].map((key) => receiver.of(key)[0]!.event);
    expect(listed.ours).toEqual(sent.map((event) => ({ ...event, delivered: true, attempts: 1 })));
    const createdAt = listed.events.map((event) => Date.parse(event.created_at));
    expect(createdAt).toEqual([...createdAt].sort((a, b) => a - b));
  });
});

describe('mock provider events with the test knobs', () => {
  const running: ProviderProcess[] = [];
  let receiver: Awaited<ReturnType<typeof startReceiver>>;

  beforeAll(async () => {
    receiver = await startReceiver();
  });

  afterAll(async () => {
    await Promise.all(running.map((provider) => provider.stop()));
    await receiver?.close();
  });

  const start = async (env: Record<string, string>) => {
    const provider = await startProvider({ PROVIDER_WEBHOOK_URL: receiver.url, ...env });
    running.push(provider);
    return provider;
  };

  it('with PROVIDER_WEBHOOK_DUPLICATE_RATE=1, every event arrives twice with the same id and body', async () => {
    const provider = await start({ PROVIDER_WEBHOOK_DUPLICATE_RATE: '1' });
    const keys = [newKey(), newKey(), newKey()];

    for (const key of keys) await postCharge(provider, key, chargeBody('pm_card_ok'));
    for (const key of keys) await acknowledged(receiver, key, 2);

    for (const key of keys) {
      const [once, twice] = receiver.of(key);
      expect(twice!.headers['webhook-id']).toBe(once!.headers['webhook-id']);
      expect(twice!.body).toBe(once!.body);
    }
    const listed = (await provider.events()).filter((event) => keys.includes(event.data.provider_key));
    expect(listed.map((event) => [event.delivered, event.attempts])).toEqual(keys.map(() => [true, 1]));
  });

  it('with PROVIDER_WEBHOOK_DUPLICATE_RATE=1, a refund event arrives twice with the same id and body', async () => {
    const provider = await start({ PROVIDER_WEBHOOK_DUPLICATE_RATE: '1' });
    const { refundBody } = await charged(provider, 'pm_card_ok');
    const key = newKey();

    await postRefund(provider, key, refundBody());
    const [once, twice] = await acknowledged(receiver, key, 2);

    expect(once!.event.type).toBe('refund.succeeded');
    expect(twice!.headers['webhook-id']).toBe(once!.headers['webhook-id']);
    expect(twice!.body).toBe(once!.body);
  });

  it('with PROVIDER_WEBHOOK_MAX_DELAY_MS, every event still arrives, once', async () => {
    const provider = await start({ PROVIDER_WEBHOOK_MAX_DELAY_MS: '300' });
    const keys = Array.from({ length: 10 }, newKey);

    await Promise.all(keys.map((key) => postCharge(provider, key, chargeBody('pm_card_declined'))));
    for (const key of keys) await acknowledged(receiver, key, 1);

    expect(keys.map((key) => receiver.of(key).length)).toEqual(keys.map(() => 1));
  });
});

describe('mock provider events across restarts (PROVIDER_DATA_FILE)', () => {
  const running: ProviderProcess[] = [];
  let dir: string;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mock-provider-events-e2e-'));
    receiver = await startReceiver();
  });

  afterEach(() => {
    receiver.answer = () => 200;
  });

  afterAll(async () => {
    await Promise.all(running.map((provider) => provider.stop()));
    await receiver?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const start = async (env: Record<string, string>) => {
    const provider = await startProvider({ PROVIDER_WEBHOOK_URL: receiver.url, ...env });
    running.push(provider);
    return provider;
  };

  /** A bound on stop(): a provider that hangs on its retries is SIGKILLed and fails the exit check. */
  const STOP_GRACE_MS = 3_000;

  it('delivers after a restart an event no receiver acknowledged before the stop, with the same id', async () => {
    const env = { PROVIDER_DATA_FILE: join(dir, 'unacknowledged.jsonl') };
    receiver.answer = () => 503;
    const first = await start(env);
    const key = newKey();
    await postCharge(first, key, chargeBody('pm_card_ok'));
    await eventually(() => (receiver.of(key).length >= 2 ? true : undefined), { what: 'two refused deliveries' });

    const exit = await first.stop(STOP_GRACE_MS);
    receiver.answer = () => 200;
    const second = await start(env);
    const [delivered] = await acknowledged(receiver, key, 1);

    expect(exit).toEqual({ code: 0, signal: null });
    expect(new Set(receiver.of(key).map((delivery) => delivery.event.id))).toEqual(new Set([delivered!.event.id]));
    const listed = await eventually(
      async () => (await second.events()).find((event) => event.id === delivered!.event.id && event.delivered),
      { what: 'the event listed as delivered after the restart' },
    );
    expect(listed).toEqual({ ...delivered!.event, delivered: true, attempts: expect.any(Number) });
  });

  it('settles a pending charge after a restart from the journal, and emits no change twice', async () => {
    const env = { PROVIDER_DATA_FILE: join(dir, 'pending.jsonl'), PROVIDER_PENDING_SETTLE_MS: '1500' };
    const first = await start(env);
    const key = newKey();
    await postCharge(first, key, chargeBody('pm_card_pending'));
    await acknowledged(receiver, key, 1);
    const creation = async () => (await first.events()).find((event) => event.data.provider_key === key);
    await eventually(async () => ((await creation())?.delivered ? true : undefined), {
      what: 'the creation event journaled as delivered',
    });
    expect(await first.stop(STOP_GRACE_MS)).toEqual({ code: 0, signal: null });

    // Down at the settle time: the next start re-arms the timer from the journal.
    const second = await start(env);
    await acknowledged(receiver, key, 2);
    const emitted = (await second.events()).filter((event) => event.data.provider_key === key);
    await eventually(async () => ((await second.events()).every((event) => event.delivered) ? true : undefined), {
      what: 'the settle journaled as delivered',
    });
    expect(await second.stop(STOP_GRACE_MS)).toEqual({ code: 0, signal: null });

    const third = await start(env);
    // Any re-emission would happen on start, before the provider answers: it would be listed by now.
    const afterRestart = (await third.events()).filter((event) => event.data.provider_key === key);
    const sentinel = newKey();
    await postCharge(third, sentinel, chargeBody('pm_card_ok'));
    await acknowledged(receiver, sentinel, 1);

    expect(summary(emitted)).toEqual(['charge.pending v1', 'charge.succeeded v2']);
    expect(afterRestart.map((event) => event.id)).toEqual(emitted.map((event) => event.id));
    const received = receiver.of(key).map((delivery) => delivery.event);
    expect(summary(received)).toEqual(['charge.pending v1', 'charge.succeeded v2']);
  });
});
