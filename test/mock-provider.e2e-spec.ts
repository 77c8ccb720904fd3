import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Charge, type ProviderProcess, startProvider } from '../scripts/lib/processes';
import { eventually } from './support/eventually';

jest.setTimeout(30_000);

const newKey = () => `key_${randomUUID()}`;

function postCharge(
  provider: ProviderProcess,
  key: string | undefined,
  body: Record<string, unknown>,
  init: { signal?: AbortSignal; headers?: Record<string, string> } = {},
): Promise<Response> {
  return fetch(`${provider.url}/charges`, {
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

describe('mock provider (spawned process)', () => {
  const SLOW_REPLY_MS = 300;
  let provider: ProviderProcess;

  beforeAll(async () => {
    provider = await startProvider({
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
    const provider = await startProvider(env);
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

  it('GET /charges/:key is 503; GET /charges and /health are spared', async () => {
    const read = await getCharge(provider, newKey());
    const list = await fetch(`${provider.url}/charges`);
    const health = await fetch(`${provider.url}/health`);

    expect(read.status).toBe(503);
    expect(list.status).toBe(200);
    expect(health.status).toBe(200);
  });
});
