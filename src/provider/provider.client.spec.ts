import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Logger } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { type AppConfig, loadConfig } from '../config/app-config';
import { ConfigModule } from '../config/config.module';
import { Metrics } from '../metrics/metrics';
import { MetricsModule } from '../metrics/metrics.module';
import { ProviderBreaker } from './provider-breaker';
import { PROVIDER_CLIENT_DEPS, ProviderClient, type ProviderClientDeps } from './provider.client';
import { ProviderModule } from './provider.module';
import { RetryBudgets } from './retry-budget';
import { eventually } from '../../test/support/eventually';

const CHARGE = { id: 'ch_1', status: 'succeeded', amount: 500, currency: 'USD', failure_code: null };
const INPUT = {
  providerKey: 'pk_pay_1',
  amount: 500,
  currency: 'USD',
  paymentMethod: 'pm_card_ok',
  reference: 'pay_1',
};
/** A refund as the provider answers it; the client keeps only what ProviderRefund holds. */
const REFUND_ANSWER = {
  id: 'rf_1',
  object: 'refund',
  charge: 'ch_1',
  amount: 200,
  currency: 'USD',
  status: 'succeeded',
  failure_code: null,
  reference: 're_1',
  idempotency_key: 'rk_re_1',
  created_at: '2026-01-01T00:00:00.000Z',
};
const REFUND = { id: 'rf_1', status: 'succeeded', amount: 200, charge: 'ch_1', failure_code: null };
const REFUND_INPUT = { providerKey: 'rk_re_1', charge: 'ch_1', amount: 200, reference: 're_1' };
/** The API clients whose payments the calls are for. */
const A = { clientId: 'client_a' };
const B = { clientId: 'client_b' };

interface Received {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/** Scripts the provider: request n (0-based) is answered by step n, the last step repeats. */
type Step = (req: IncomingMessage, res: ServerResponse) => void;

const reply =
  (status: number, body: unknown = CHARGE, headers: Record<string, string> = {}): Step =>
  (_req, res) => {
    res.writeHead(status, { 'Content-Type': 'application/json', ...headers });
    res.end(typeof body === 'string' ? body : JSON.stringify(body));
  };

/** Reads the request, then destroys the socket without a reply: the lost reply. */
const hangUp: Step = (req) => req.socket.destroy();

/** Answers only after `ms`, unless the client has gone by then. */
const slow =
  (ms: number, then: Step = reply(201)): Step =>
  (req, res) => {
    const timer = setTimeout(() => then(req, res), ms);
    res.on('close', () => clearTimeout(timer));
  };

let server: ReturnType<typeof createServer>;
let received: Received[];
let steps: Step[];

async function startProvider(...script: Step[]): Promise<string> {
  steps = script;
  received = [];
  server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (body += chunk));
    req.on('end', () => {
      received.push({ method: req.method!, url: req.url!, headers: req.headers, body });
      steps[Math.min(received.length - 1, steps.length - 1)](req, res);
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

afterEach(async () => {
  if (!server?.listening) return;
  server.closeAllConnections();
  server.close();
  await once(server, 'close');
});

function config(url: string, env: Record<string, string> = {}) {
  return loadConfig({
    PROVIDER_URL: url,
    PROVIDER_TIMEOUT_MS: '2000',
    PROVIDER_MAX_ATTEMPTS: '3',
    PROVIDER_DEADLINE_MS: '8000',
    PROVIDER_BACKOFF_BASE_MS: '100',
    PROVIDER_BACKOFF_CAP_MS: '1000',
    ...env,
  });
}

/** The client with budgets, a breaker and metrics of its own, as ProviderModule wires them. */
function wire(cfg: AppConfig, deps?: Partial<ProviderClientDeps>) {
  const metrics = new Metrics();
  const { retryBudget, trackedClients } = cfg.provider;
  const budgets = new RetryBudgets(retryBudget.capacity, retryBudget.refund, trackedClients);
  const breaker = new ProviderBreaker(cfg, metrics);
  return { client: new ProviderClient(cfg, budgets, breaker, metrics, deps), budgets, breaker, metrics };
}

function clientFor(cfg: AppConfig, deps?: Partial<ProviderClientDeps>): ProviderClient {
  return wire(cfg, deps).client;
}

async function counter(metrics: Metrics, name: string, labels: Record<string, string> = {}): Promise<number> {
  const metric = (await metrics.registry.getSingleMetric(name)?.get())?.values ?? [];
  const match = metric.find((v) => Object.entries(labels).every(([k, want]) => v.labels[k] === want));
  return match?.value ?? 0;
}

/** A fake clock that only moves when the client sleeps: retries cost no real time. */
function fakeTime(random = 0.5) {
  const clock = { t: 0, slept: [] as number[] };
  const deps: Partial<ProviderClientDeps> = {
    now: () => clock.t,
    wallClock: () => Date.UTC(2026, 0, 1) + clock.t,
    sleep: async (ms) => {
      clock.slept.push(ms);
      clock.t += ms;
    },
    random: () => random,
  };
  return { clock, deps };
}

let logs: { error: jest.SpyInstance; warn: jest.SpyInstance };
beforeEach(() => {
  logs = {
    error: jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined),
    warn: jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined),
  };
  jest.spyOn(Logger.prototype, 'debug').mockImplementation(() => undefined);
  jest.spyOn(Logger.prototype, 'log').mockImplementation(() => undefined);
});
afterEach(() => jest.restoreAllMocks());

/** The one give-up log entry, whichever level it went to. */
function gaveUpEntry(): Record<string, unknown> {
  const calls = [...logs.error.mock.calls, ...logs.warn.mock.calls];
  expect(calls).toHaveLength(1);
  return calls[0][0] as Record<string, unknown>;
}

describe('ProviderClient.createCharge', () => {
  it('posts the charge with the idempotency key, request id and JSON body', async () => {
    const client = clientFor(config(await startProvider(reply(201))), fakeTime().deps);
    await expect(client.createCharge(INPUT, { ...A, requestId: 'req_1' })).resolves.toEqual({
      kind: 'answered',
      charge: CHARGE,
    });
    expect(received).toHaveLength(1);
    expect(received[0]).toMatchObject({ method: 'POST', url: '/charges' });
    expect(received[0].headers).toMatchObject({
      'idempotency-key': 'pk_pay_1',
      'x-request-id': 'req_1',
      'content-type': 'application/json',
    });
    expect(JSON.parse(received[0].body)).toEqual({
      amount: 500,
      currency: 'USD',
      payment_method: 'pm_card_ok',
      reference: 'pay_1',
    });
  });

  it('returns a declined charge as an answer, without retrying', async () => {
    const declined = { ...CHARGE, status: 'failed', failure_code: 'card_declined' };
    const client = clientFor(config(await startProvider(reply(201, declined))), fakeTime().deps);
    await expect(client.createCharge(INPUT, A)).resolves.toEqual({ kind: 'answered', charge: declined });
    expect(received).toHaveLength(1);
  });

  it('retries a 503 with the same key after a full-jitter wait', async () => {
    const { clock, deps } = fakeTime(0.5);
    const client = clientFor(config(await startProvider(reply(503, 'busy'), reply(201))), deps);
    await expect(client.createCharge(INPUT, A)).resolves.toEqual({ kind: 'answered', charge: CHARGE });
    expect(received.map((r) => r.headers['idempotency-key'])).toEqual(['pk_pay_1', 'pk_pay_1']);
    expect(received[1].body).toBe(received[0].body);
    // retry 0: random(0, min(cap, base)) with random() = 0.5
    expect(clock.slept).toEqual([50]);
  });

  it('grows the full-jitter ceiling per retry, up to the cap', async () => {
    const { clock, deps } = fakeTime(0.999);
    const url = await startProvider(reply(503));
    const client = clientFor(config(url, { PROVIDER_MAX_ATTEMPTS: '6', PROVIDER_BACKOFF_CAP_MS: '500' }), deps);
    await client.createCharge(INPUT, A);
    expect(clock.slept.map(Math.round)).toEqual([100, 200, 400, 500, 500]);
  });

  it('waits at least the Retry-After of a 429 before retrying', async () => {
    const { clock, deps } = fakeTime(0);
    const url = await startProvider(reply(429, { error: 'slow down' }, { 'Retry-After': '1' }), reply(201));
    const client = clientFor(config(url), deps);
    await expect(client.createCharge(INPUT, A)).resolves.toEqual({ kind: 'answered', charge: CHARGE });
    expect(received).toHaveLength(2);
    expect(clock.slept).toEqual([1000]);
  });

  it('honours an HTTP-date Retry-After on a 503, read against the wall clock', async () => {
    const { clock, deps } = fakeTime(0);
    const url = await startProvider(reply(503, 'busy', { 'Retry-After': 'Thu, 01 Jan 2026 00:00:03 GMT' }), reply(201));
    const client = clientFor(config(url), deps);
    await expect(client.createCharge(INPUT, A)).resolves.toMatchObject({ kind: 'answered' });
    expect(clock.slept).toEqual([3000]);
  });

  it('really sleeps for a Retry-After of 1 s with the default clock and sleep', async () => {
    const url = await startProvider(reply(429, { error: 'slow down' }, { 'Retry-After': '1' }), reply(201));
    const client = clientFor(config(url));
    const started = performance.now();
    await expect(client.createCharge(INPUT, A)).resolves.toMatchObject({ kind: 'answered' });
    const elapsed = performance.now() - started;
    expect(received).toHaveLength(2);
    expect(elapsed).toBeGreaterThanOrEqual(950);
    expect(elapsed).toBeLessThan(5000);
  });

  it('retries a lost reply (socket destroyed after the request was read)', async () => {
    const client = clientFor(config(await startProvider(hangUp, reply(201))), fakeTime().deps);
    await expect(client.createCharge(INPUT, A)).resolves.toEqual({ kind: 'answered', charge: CHARGE });
    expect(received).toHaveLength(2);
    expect(received[1].headers['idempotency-key']).toBe('pk_pay_1');
  });

  it('gives up on lost replies after maxAttempts, naming the socket error', async () => {
    const client = clientFor(config(await startProvider(hangUp)), fakeTime().deps);
    const result = await client.createCharge(INPUT, A);
    expect(result).toMatchObject({ kind: 'unknown', attempts: 3 });
    expect(result.kind === 'unknown' && result.reason).toMatch(/^UND_ERR_SOCKET|^ECONNRESET/);
    expect(received).toHaveLength(3);
  });

  it('abandons an attempt at the per-attempt timeout and retries', async () => {
    const url = await startProvider(slow(3000), reply(201));
    const client = clientFor(config(url, { PROVIDER_TIMEOUT_MS: '200' }), fakeTime().deps);
    const started = performance.now();
    await expect(client.createCharge(INPUT, A)).resolves.toEqual({ kind: 'answered', charge: CHARGE });
    expect(performance.now() - started).toBeLessThan(2000);
    expect(received).toHaveLength(2);
  });

  it('caps the per-attempt timeout at the time left before the deadline', async () => {
    const url = await startProvider(slow(3000));
    const client = clientFor(config(url)); // timeout 2000 ms; real clock, as time must pass
    const started = performance.now();
    const result = await client.createCharge(INPUT, { ...A, deadlineMs: 150 });
    expect(performance.now() - started).toBeLessThan(1500);
    expect(result).toMatchObject({ kind: 'unknown', attempts: 1 });
    expect(result.kind === 'unknown' && result.reason).toMatch(/^no answer within 1[45]\d ms/);
  });

  it('does not retry a 400, and logs it at error level with key and request id', async () => {
    const url = await startProvider(reply(400, { error: { code: 'parameter_invalid' } }));
    const client = clientFor(config(url), fakeTime().deps);
    const result = await client.createCharge(INPUT, { ...A, requestId: 'req_400' });
    expect(result).toEqual({
      kind: 'unknown',
      gaveUp: 'not_retryable',
      attempts: 1,
      reason: 'HTTP 400 {"error":{"code":"parameter_invalid"}} (not retried)',
    });
    expect(received).toHaveLength(1);
    expect(logs.error).toHaveBeenCalledTimes(1);
    expect(gaveUpEntry()).toMatchObject({ providerKey: 'pk_pay_1', requestId: 'req_400', attempts: 1 });
  });

  it('does not retry a 422 (same key, other parameters) or a 501', async () => {
    const client = clientFor(config(await startProvider(reply(422, 'mismatch'), reply(501))), fakeTime().deps);
    await expect(client.createCharge(INPUT, A)).resolves.toMatchObject({ kind: 'unknown', attempts: 1 });
    await expect(client.createCharge(INPUT, A)).resolves.toMatchObject({ kind: 'unknown', attempts: 1 });
    expect(received).toHaveLength(2);
  });

  it('follows no redirect: a 302 is an unknown outcome, and nothing goes where it points', async () => {
    const client = clientFor(config(await startProvider(reply(302, '', { Location: '/elsewhere' }))), fakeTime().deps);
    await expect(client.createCharge(INPUT, A)).resolves.toMatchObject({ kind: 'unknown', reason: expect.stringContaining('HTTP 302') });
    expect(received.map((r) => r.url)).not.toContain('/elsewhere');
  });

  it('treats a malformed 2xx body as unknown, not as an answer, and does not retry', async () => {
    const url = await startProvider(reply(201, { ...CHARGE, amount: '500' }));
    const client = clientFor(config(url), fakeTime().deps);
    const result = await client.createCharge(INPUT, A);
    expect(result).toMatchObject({ kind: 'unknown', attempts: 1 });
    expect(result.kind === 'unknown' && result.reason).toMatch(/^HTTP 201 with a malformed charge/);
    expect(received).toHaveLength(1);
    expect(logs.error).toHaveBeenCalledTimes(1);
  });

  it('treats a decline the database cannot store (U+0000 in failure_code) as unknown, never as a decline', async () => {
    const poisoned = { ...CHARGE, status: 'failed', failure_code: 'do_not_honor\u0000' };
    const client = clientFor(config(await startProvider(reply(201, poisoned))), fakeTime().deps);
    const result = await client.createCharge(INPUT, A);
    expect(result).toMatchObject({ kind: 'unknown', gaveUp: 'not_retryable', attempts: 1 });
    expect(result.kind === 'unknown' && result.reason).toMatch(/^HTTP 201 with a malformed charge/);
  });

  it('reads no more of an answer than PROVIDER_MAX_BODY_BYTES, with or without a Content-Length', async () => {
    const padded = JSON.stringify({ ...CHARGE, padding: 'x'.repeat(4_096) });
    const chunked: Step = (_req, res) => {
      res.writeHead(201, { 'Content-Type': 'application/json' });
      res.write(padded.slice(0, 100));
      res.end(padded.slice(100));
    };
    const url = await startProvider(reply(201, padded), chunked, reply(200, padded));
    const client = clientFor(config(url, { PROVIDER_MAX_BODY_BYTES: '2048' }), fakeTime().deps);
    for (const call of [() => client.createCharge(INPUT, A), () => client.createCharge(INPUT, A)]) {
      const result = await call();
      expect(result).toMatchObject({ kind: 'unknown', gaveUp: 'not_retryable', attempts: 1 });
      expect(result.kind === 'unknown' && result.reason).toMatch(/^HTTP 201 with a body over 2048 bytes/);
    }
    const roomy = clientFor(config(url, { PROVIDER_MAX_BODY_BYTES: '8192' }), fakeTime().deps);
    await expect(roomy.getCharge(INPUT.providerKey, A)).resolves.toMatchObject({ kind: 'found', charge: CHARGE });
  });

  it('treats a 2xx with invalid JSON as unknown', async () => {
    const client = clientFor(config(await startProvider(reply(201, '{"id":'))), fakeTime().deps);
    await expect(client.createCharge(INPUT, A)).resolves.toMatchObject({ kind: 'unknown', attempts: 1 });
  });

  it('makes at most maxAttempts attempts, then fails loudly', async () => {
    const { clock, deps } = fakeTime();
    const client = clientFor(config(await startProvider(reply(503, 'down'))), deps);
    const result = await client.createCharge(INPUT, { ...A, requestId: 'req_3' });
    expect(result).toEqual({
      kind: 'unknown',
      gaveUp: 'attempts_exhausted',
      attempts: 3,
      reason: 'HTTP 503 down (3 of 3 attempts used)',
    });
    expect(received).toHaveLength(3);
    expect(clock.slept).toHaveLength(2);
    expect(logs.warn).toHaveBeenCalledTimes(1);
    const entry = gaveUpEntry();
    expect(entry).toMatchObject({ providerKey: 'pk_pay_1', requestId: 'req_3', attempts: 3, lastError: 'HTTP 503 down' });
    expect(entry.msg).toMatch(/after 3 attempt\(s\).*HTTP 503 down.*pk_pay_1.*req_3/);
  });

  it('lets the caller lower maxAttempts to 1', async () => {
    const client = clientFor(config(await startProvider(reply(503))), fakeTime().deps);
    await expect(client.createCharge(INPUT, { ...A, maxAttempts: 1 })).resolves.toMatchObject({ kind: 'unknown', attempts: 1 });
    expect(received).toHaveLength(1);
  });

  it('gives up at once when Retry-After does not fit in the remaining deadline', async () => {
    const { clock, deps } = fakeTime();
    const url = await startProvider(reply(429, 'later', { 'Retry-After': '5' }), reply(201));
    const client = clientFor(config(url), deps);
    const result = await client.createCharge(INPUT, { ...A, deadlineMs: 2000 });
    expect(result).toMatchObject({ kind: 'unknown', attempts: 1 });
    expect(result.kind === 'unknown' && result.reason).toMatch(/next attempt due in 5000 ms, only 2000 ms left/);
    expect(received).toHaveLength(1);
    expect(clock.slept).toEqual([]);
  });

  it('stops retrying when the waits have used up the deadline', async () => {
    const { clock, deps } = fakeTime();
    const url = await startProvider(reply(503, 'busy', { 'Retry-After': '1' }));
    const client = clientFor(config(url, { PROVIDER_MAX_ATTEMPTS: '10' }), deps);
    const result = await client.createCharge(INPUT, { ...A, deadlineMs: 2500 });
    // 1 s + 1 s of waiting fits in 2.5 s; a third wait would not.
    expect(result).toMatchObject({ kind: 'unknown', attempts: 3 });
    expect(clock.slept).toEqual([1000, 1000]);
    expect(received).toHaveLength(3);
  });

  it('gives up on connection refused after maxAttempts, naming the error', async () => {
    const url = await startProvider(reply(201));
    server.close();
    await once(server, 'close');
    const client = clientFor(config(url), fakeTime().deps);
    const result = await client.createCharge(INPUT, A);
    expect(result).toMatchObject({ kind: 'unknown', attempts: 3 });
    expect(result.kind === 'unknown' && result.reason).toMatch(/^ECONNREFUSED/);
  });
});

describe('ProviderClient deadline propagation', () => {
  it('tells the provider how long each attempt will wait for its reply', async () => {
    const url = await startProvider(reply(503, 'busy', { 'Retry-After': '1' }), reply(201));
    const client = clientFor(config(url), fakeTime().deps);
    await client.createCharge(INPUT, { ...A, deadlineMs: 2500 });
    // The first attempt waits its full timeout; the second, after 1 s, only what is left of the deadline.
    expect(received.map((r) => r.headers['x-request-deadline-ms'])).toEqual(['2000', '1500']);
  });

  it('sends the time left when it is shorter than the per-attempt timeout', async () => {
    const client = clientFor(config(await startProvider(reply(200))), fakeTime().deps);
    await client.getCharge('pk_pay_1', { ...A, deadlineMs: 150 });
    expect(received[0].headers['x-request-deadline-ms']).toBe('150');
  });
});

describe('ProviderClient retry budget', () => {
  it('stops retrying once the client\'s budget is empty, logs why, and counts it', async () => {
    const url = await startProvider(reply(503, 'down'));
    const { client, budgets, metrics } = wire(
      config(url, { PROVIDER_RETRY_BUDGET_CAPACITY: '2', PROVIDER_RETRY_BUDGET_REFUND: '0' }),
      fakeTime().deps,
    );

    const first = await client.createCharge(INPUT, { ...A, requestId: 'req_a' });
    expect(first).toMatchObject({ gaveUp: 'attempts_exhausted', attempts: 3 });
    expect(budgets.for(A.clientId).tokens).toBe(0);
    logs.warn.mockClear();

    const second = await client.createCharge(INPUT, { ...A, requestId: 'req_b' });
    expect(second).toEqual({
      kind: 'unknown',
      gaveUp: 'budget_exhausted',
      attempts: 1,
      reason: 'HTTP 503 down (retry budget empty (0.00 of 2 tokens))',
    });
    expect(received).toHaveLength(4);
    expect(gaveUpEntry()).toMatchObject({
      gaveUp: 'budget_exhausted',
      requestId: 'req_b',
      clientId: A.clientId,
      retryBudgetTokens: 0,
    });
    expect(await counter(metrics, 'provider_retry_budget_exhausted_total')).toBe(1);
    expect(await counter(metrics, 'provider_retries_total')).toBe(2);
    expect(await counter(metrics, 'provider_give_ups_total', { reason: 'budget_exhausted' })).toBe(1);
    expect(await counter(metrics, 'provider_attempts_total', { operation: 'create_charge', outcome: 'transient' })).toBe(
      4,
    );
  });

  it('spends only the calling client\'s tokens: another client still retries', async () => {
    const url = await startProvider(reply(503), reply(503), reply(503), reply(503), reply(201));
    const { client, budgets } = wire(
      config(url, { PROVIDER_RETRY_BUDGET_CAPACITY: '2', PROVIDER_RETRY_BUDGET_REFUND: '0' }),
      fakeTime().deps,
    );

    await expect(client.createCharge(INPUT, A)).resolves.toMatchObject({ gaveUp: 'attempts_exhausted', attempts: 3 });
    expect(budgets.for(A.clientId).tokens).toBe(0);

    await expect(client.createCharge(INPUT, B)).resolves.toEqual({ kind: 'answered', charge: CHARGE });
    expect(received).toHaveLength(5);
    expect(budgets.for(B.clientId).tokens).toBe(1);
  });

  it('is refunded by first attempts, so healthy traffic earns retries back', async () => {
    const url = await startProvider(reply(503), reply(201), reply(200));
    const { client, budgets } = wire(
      config(url, { PROVIDER_RETRY_BUDGET_CAPACITY: '3', PROVIDER_RETRY_BUDGET_REFUND: '0.5' }),
      fakeTime().deps,
    );
    await client.createCharge(INPUT, A); // full bucket: the refund is lost at the cap, the retry spends 1
    expect(budgets.for(A.clientId).tokens).toBe(2);
    await client.getCharge('pk_pay_1', A);
    expect(budgets.for(A.clientId).tokens).toBe(2.5);
  });
});

describe('ProviderClient circuit breaker', () => {
  /** Every failing call counts: two in the window open the client's circuit. */
  const breakerEnv = {
    PROVIDER_BREAKER_MIN_CALLS: '2',
    PROVIDER_BREAKER_FAILURE_RATIO: '0.5',
    PROVIDER_BREAKER_HALF_OPEN_MS: '60000',
  };

  it('counts a call once, whatever its retries, then refuses the client\'s calls without sending', async () => {
    const url = await startProvider(reply(503, 'down'));
    const { client, breaker, metrics } = wire(config(url, breakerEnv), fakeTime().deps);

    await expect(client.createCharge(INPUT, A)).resolves.toMatchObject({ gaveUp: 'attempts_exhausted', attempts: 3 });
    expect(breaker.states(A.clientId).client).toBe('closed'); // three failed attempts, one failed call
    await expect(client.createCharge(INPUT, A)).resolves.toMatchObject({ gaveUp: 'attempts_exhausted', attempts: 3 });
    expect(breaker.states(A.clientId)).toEqual({ client: 'open', provider: 'closed' });
    expect(client.unavailableForMs(A.clientId)).toBeGreaterThan(59_000);

    const refused = await client.getCharge('pk_pay_1', { ...A, requestId: 'req_r' });
    expect(refused).toEqual({
      kind: 'unknown',
      gaveUp: 'breaker_open',
      attempts: 0,
      reason: 'circuit breaker open, nothing sent (not retried)',
    });
    expect(received).toHaveLength(6);
    expect(await counter(metrics, 'provider_breaker_state_changes_total', { scope: 'client', to: 'open' })).toBe(1);
    expect(await counter(metrics, 'provider_breaker_open_clients')).toBe(1);
    expect(await counter(metrics, 'provider_give_ups_total', { reason: 'breaker_open' })).toBe(1);
    // An open circuit is expected trouble, not a bug: a warning, not an error.
    expect(logs.error).not.toHaveBeenCalled();
  });

  it('leaves other clients\' calls alone while one client\'s circuit is open', async () => {
    const url = await startProvider(reply(503), reply(503), reply(200));
    const { client, breaker } = wire(config(url, { ...breakerEnv, PROVIDER_MAX_ATTEMPTS: '1' }), fakeTime().deps);
    await client.getCharge('pk_1', A);
    await client.getCharge('pk_2', A);
    expect(breaker.states(A.clientId).client).toBe('open');

    expect(client.unavailableForMs(B.clientId)).toBe(0);
    await expect(client.getCharge('pk_3', B)).resolves.toEqual({ kind: 'found', charge: CHARGE });
    expect(breaker.states(B.clientId)).toEqual({ client: 'closed', provider: 'closed' });
  });

  it('ends a call whose retries find its circuit opened meanwhile, as unknown, without sending again', async () => {
    const url = await startProvider(reply(503, 'down'));
    let opening: Promise<unknown> | undefined;
    // While the call waits to retry, another call of the same client fails and opens the circuit.
    const sleep = async () => {
      opening ??= client.getCharge('pk_2', { ...A, maxAttempts: 1 });
      await opening;
    };
    const { client } = wire(config(url, { ...breakerEnv, PROVIDER_BREAKER_MIN_CALLS: '1' }), { ...fakeTime().deps, sleep });

    await expect(client.createCharge(INPUT, A)).resolves.toMatchObject({ gaveUp: 'breaker_open', attempts: 2 });
    expect(received).toHaveLength(2);
  });

  it('does not count definitive answers or 4xx against the provider', async () => {
    const url = await startProvider(reply(503), reply(404, { error: 'no' }), reply(400, { error: 'no' }), reply(503));
    const { client, breaker } = wire(config(url, { ...breakerEnv, PROVIDER_MAX_ATTEMPTS: '1' }), fakeTime().deps);

    await client.getCharge('pk_1', A);
    await expect(client.getCharge('pk_2', A)).resolves.toEqual({ kind: 'not_found' });
    await expect(client.getCharge('pk_3', A)).resolves.toMatchObject({ gaveUp: 'not_retryable' });
    await client.getCharge('pk_4', A);
    expect(breaker.states(A.clientId).client).toBe('closed'); // two failures in four calls: not more than half
  });

  it('lets a probe through once half-open, and closes on its success', async () => {
    const url = await startProvider(reply(503), reply(200));
    const { client, breaker, metrics } = wire(
      config(url, { ...breakerEnv, PROVIDER_BREAKER_MIN_CALLS: '1', PROVIDER_BREAKER_HALF_OPEN_MS: '50' }),
      fakeTime().deps,
    );
    await client.getCharge('pk_pay_1', { ...A, maxAttempts: 1 });
    expect(breaker.states(A.clientId).client).toBe('open');

    await eventually(() => (client.unavailableForMs(A.clientId) === 0 ? true : undefined), {
      timeoutMs: 5_000,
      intervalMs: 10,
      what: 'the circuit to become due for a probe',
    });
    await expect(client.getCharge('pk_pay_1', { ...A, maxAttempts: 1 })).resolves.toMatchObject({ kind: 'found' });
    expect(breaker.states(A.clientId).client).toBe('closed');
    expect(await counter(metrics, 'provider_breaker_state_changes_total', { scope: 'client', to: 'half_open' })).toBe(1);
    expect(await counter(metrics, 'provider_breaker_state_changes_total', { scope: 'client', to: 'closed' })).toBe(1);
  });
});

describe('ProviderClient call options', () => {
  it.each([{ maxAttempts: 0 }, { maxAttempts: 1.5 }, { maxAttempts: Number.NaN }, { deadlineMs: 0 }, { deadlineMs: Number.NaN }])(
    'rejects %j as a caller bug, before calling the provider',
    async (opts) => {
      const client = clientFor(config(await startProvider(reply(201))), fakeTime().deps);
      await expect(client.createCharge(INPUT, { ...A, ...opts })).rejects.toThrow(RangeError);
      expect(received).toHaveLength(0);
    },
  );
});

describe('ProviderClient.getCharge', () => {
  it('finds a charge by provider key, without an idempotency key', async () => {
    const client = clientFor(config(await startProvider(reply(200))), fakeTime().deps);
    await expect(client.getCharge('pk/odd key', { ...A, requestId: 'req_g' })).resolves.toEqual({
      kind: 'found',
      charge: CHARGE,
    });
    expect(received[0]).toMatchObject({ method: 'GET', url: '/charges/pk%2Fodd%20key' });
    expect(received[0].headers['idempotency-key']).toBeUndefined();
    expect(received[0].headers['x-request-id']).toBe('req_g');
  });

  it('reports a 404 as not_found, without retrying', async () => {
    const client = clientFor(config(await startProvider(reply(404, { error: 'not found' }))), fakeTime().deps);
    await expect(client.getCharge('pk_pay_1', A)).resolves.toEqual({ kind: 'not_found' });
    expect(received).toHaveLength(1);
  });

  it('retries a 503 and then finds the charge', async () => {
    const client = clientFor(config(await startProvider(reply(503), reply(200))), fakeTime().deps);
    await expect(client.getCharge('pk_pay_1', A)).resolves.toEqual({ kind: 'found', charge: CHARGE });
    expect(received).toHaveLength(2);
  });

  it('is unknown, after one attempt, when the caller passes maxAttempts: 1', async () => {
    const client = clientFor(config(await startProvider(reply(503), reply(200))), fakeTime().deps);
    await expect(client.getCharge('pk_pay_1', { ...A, maxAttempts: 1 })).resolves.toMatchObject({
      kind: 'unknown',
      attempts: 1,
    });
    expect(received).toHaveLength(1);
  });
});

describe('ProviderClient.createRefund', () => {
  it('posts the refund with its own idempotency key, request id and JSON body, and keeps only the refund\'s fields', async () => {
    const client = clientFor(config(await startProvider(reply(201, REFUND_ANSWER))), fakeTime().deps);
    await expect(client.createRefund(REFUND_INPUT, { ...A, requestId: 'req_rf' })).resolves.toEqual({
      kind: 'answered',
      refund: REFUND,
    });
    expect(received).toHaveLength(1);
    expect(received[0]).toMatchObject({ method: 'POST', url: '/refunds' });
    expect(received[0].headers).toMatchObject({
      'idempotency-key': 'rk_re_1',
      'x-request-id': 'req_rf',
      'content-type': 'application/json',
    });
    expect(JSON.parse(received[0].body)).toEqual({ charge: 'ch_1', amount: 200, reference: 're_1' });
  });

  it('returns a failed refund as an answer, without retrying', async () => {
    const failed = { ...REFUND_ANSWER, status: 'failed', failure_code: 'refund_declined' };
    const client = clientFor(config(await startProvider(reply(201, failed))), fakeTime().deps);
    await expect(client.createRefund(REFUND_INPUT, A)).resolves.toEqual({
      kind: 'answered',
      refund: { ...REFUND, status: 'failed', failure_code: 'refund_declined' },
    });
    expect(received).toHaveLength(1);
  });

  it('retries a 503 with the same key and body, so the provider replays rather than refunds twice', async () => {
    const { clock, deps } = fakeTime(0.5);
    const url = await startProvider(reply(503, 'busy'), reply(201, REFUND_ANSWER));
    const { client, metrics } = wire(config(url), deps);
    await expect(client.createRefund(REFUND_INPUT, A)).resolves.toEqual({ kind: 'answered', refund: REFUND });
    expect(received.map((r) => r.headers['idempotency-key'])).toEqual(['rk_re_1', 'rk_re_1']);
    expect(received[1].body).toBe(received[0].body);
    expect(clock.slept).toEqual([50]);
    expect(await counter(metrics, 'provider_attempts_total', { operation: 'create_refund', outcome: 'transient' })).toBe(1);
    expect(await counter(metrics, 'provider_attempts_total', { operation: 'create_refund', outcome: 'answered' })).toBe(1);
  });

  it('retries a lost reply with the same key', async () => {
    const client = clientFor(config(await startProvider(hangUp, reply(201, REFUND_ANSWER))), fakeTime().deps);
    await expect(client.createRefund(REFUND_INPUT, A)).resolves.toEqual({ kind: 'answered', refund: REFUND });
    expect(received.map((r) => r.headers['idempotency-key'])).toEqual(['rk_re_1', 'rk_re_1']);
  });

  it('does not retry a 422 (more than is left of the charge), and logs it at error level with key and request id', async () => {
    const tooLarge = { error: { code: 'amount_too_large', message: 'Refunding 200 would exceed charge ch_1' } };
    const client = clientFor(config(await startProvider(reply(422, tooLarge))), fakeTime().deps);
    const result = await client.createRefund(REFUND_INPUT, { ...A, requestId: 'req_422' });
    expect(result).toEqual({
      kind: 'unknown',
      gaveUp: 'not_retryable',
      attempts: 1,
      reason: `HTTP 422 ${JSON.stringify(tooLarge)} (not retried)`,
    });
    expect(received).toHaveLength(1);
    expect(logs.error).toHaveBeenCalledTimes(1);
    expect(gaveUpEntry()).toMatchObject({ providerKey: 'rk_re_1', requestId: 'req_422', attempts: 1 });
    expect(gaveUpEntry().msg).toMatch(/^Provider POST \/refunds gave up after 1 attempt\(s\)/);
  });

  it.each([
    ['an amount as a string', { ...REFUND_ANSWER, amount: '200' }],
    ['a zero amount', { ...REFUND_ANSWER, amount: 0 }],
    ['no charge', { ...REFUND_ANSWER, charge: undefined }],
    ['U+0000 in the failure_code', { ...REFUND_ANSWER, status: 'failed', failure_code: 'refund_declined\u0000' }],
    ['a charge in place of the refund', CHARGE],
    ['invalid JSON', '{"id":'],
    ['an empty body', ''],
  ])('treats a 2xx with %s as unknown, not as an answer, and does not retry', async (_case, body) => {
    const client = clientFor(config(await startProvider(reply(201, body))), fakeTime().deps);
    const result = await client.createRefund(REFUND_INPUT, A);
    expect(result).toMatchObject({ kind: 'unknown', gaveUp: 'not_retryable', attempts: 1 });
    expect(result.kind === 'unknown' && result.reason).toMatch(/^HTTP 201 with a malformed refund: /);
    expect(received).toHaveLength(1);
  });

  it('reads no more of an answer than PROVIDER_MAX_BODY_BYTES, with or without a Content-Length', async () => {
    const padded = JSON.stringify({ ...REFUND_ANSWER, padding: 'x'.repeat(4_096) });
    const chunked: Step = (_req, res) => {
      res.writeHead(201, { 'Content-Type': 'application/json' });
      res.write(padded.slice(0, 100));
      res.end(padded.slice(100));
    };
    const url = await startProvider(reply(201, padded), chunked, reply(200, padded));
    const client = clientFor(config(url, { PROVIDER_MAX_BODY_BYTES: '2048' }), fakeTime().deps);
    for (let i = 0; i < 2; i++) {
      const result = await client.createRefund(REFUND_INPUT, A);
      expect(result).toMatchObject({ kind: 'unknown', gaveUp: 'not_retryable', attempts: 1 });
      expect(result.kind === 'unknown' && result.reason).toMatch(/^HTTP 201 with a body over 2048 bytes/);
    }
    const roomy = clientFor(config(url, { PROVIDER_MAX_BODY_BYTES: '8192' }), fakeTime().deps);
    await expect(roomy.getRefund(REFUND_INPUT.providerKey, A)).resolves.toEqual({ kind: 'found', refund: REFUND });
  });

  it('is refused without sending while the client\'s circuit is open, like any call', async () => {
    const url = await startProvider(reply(503));
    const { client, breaker } = wire(
      config(url, { PROVIDER_BREAKER_MIN_CALLS: '1', PROVIDER_BREAKER_HALF_OPEN_MS: '60000', PROVIDER_MAX_ATTEMPTS: '1' }),
      fakeTime().deps,
    );
    await client.getCharge('pk_pay_1', A);
    expect(breaker.states(A.clientId).client).toBe('open');
    await expect(client.createRefund(REFUND_INPUT, A)).resolves.toMatchObject({
      kind: 'unknown',
      gaveUp: 'breaker_open',
      attempts: 0,
    });
    expect(received).toHaveLength(1);
  });
});

describe('ProviderClient.getRefund', () => {
  it('finds a refund by its provider key, without an idempotency key', async () => {
    const url = await startProvider(reply(200, REFUND_ANSWER));
    const { client, metrics } = wire(config(url), fakeTime().deps);
    await expect(client.getRefund('rk/odd key', { ...A, requestId: 'req_gr' })).resolves.toEqual({
      kind: 'found',
      refund: REFUND,
    });
    expect(received[0]).toMatchObject({ method: 'GET', url: '/refunds/rk%2Fodd%20key' });
    expect(received[0].headers['idempotency-key']).toBeUndefined();
    expect(received[0].headers['x-request-id']).toBe('req_gr');
    expect(await counter(metrics, 'provider_attempts_total', { operation: 'get_refund', outcome: 'answered' })).toBe(1);
  });

  it('reports a 404 as not_found, without retrying', async () => {
    const notFound = { error: { code: 'refund_not_found', message: 'No refund with key rk_re_1 was received' } };
    const client = clientFor(config(await startProvider(reply(404, notFound))), fakeTime().deps);
    await expect(client.getRefund('rk_re_1', A)).resolves.toEqual({ kind: 'not_found' });
    expect(received).toHaveLength(1);
    expect(logs.error).not.toHaveBeenCalled();
  });

  it('retries a 503 and then finds the refund', async () => {
    const client = clientFor(config(await startProvider(reply(503), reply(200, REFUND_ANSWER))), fakeTime().deps);
    await expect(client.getRefund('rk_re_1', A)).resolves.toEqual({ kind: 'found', refund: REFUND });
    expect(received).toHaveLength(2);
  });

  it('treats a malformed refund as unknown, never as not_found', async () => {
    const url = await startProvider(reply(200, { ...REFUND_ANSWER, id: 'rf_\ud800' }));
    const client = clientFor(config(url), fakeTime().deps);
    const result = await client.getRefund('rk_re_1', A);
    expect(result).toMatchObject({ kind: 'unknown', gaveUp: 'not_retryable', attempts: 1 });
    expect(result.kind === 'unknown' && result.reason).toMatch(/^HTTP 200 with a malformed refund/);
  });
});

describe('ProviderModule', () => {
  it('builds the client from the configuration alone', async () => {
    const url = await startProvider(reply(200));
    const moduleRef = await Test.createTestingModule({
      imports: [ConfigModule.forRoot(config(url)), MetricsModule, ProviderModule],
    }).compile();
    const client = moduleRef.get(ProviderClient);
    await expect(client.getCharge('pk_pay_1', A)).resolves.toEqual({ kind: 'found', charge: CHARGE });
    await moduleRef.close();
  });

  it('takes fake time through PROVIDER_CLIENT_DEPS when a module provides it', async () => {
    const url = await startProvider(reply(503), reply(200));
    const { clock, deps } = fakeTime(0.5);
    const moduleRef = await Test.createTestingModule({
      imports: [ConfigModule.forRoot(config(url)), MetricsModule],
      providers: [
        ProviderClient,
        ProviderBreaker,
        { provide: RetryBudgets, useValue: new RetryBudgets(10, 0.1, 100) },
        { provide: PROVIDER_CLIENT_DEPS, useValue: deps },
      ],
    }).compile();
    await expect(moduleRef.get(ProviderClient).getCharge('pk_pay_1', A)).resolves.toMatchObject({ kind: 'found' });
    expect(clock.slept).toEqual([50]);
    await moduleRef.close();
  });
});
