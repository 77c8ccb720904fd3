import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { type ProviderProcess, startProvider } from './support/processes';
import { eventually } from './support/eventually';
import { type InProcessStack, startInProcessStack } from './support/in-process-app';
import { createClient } from './support/test-env';

// Each file starts the API (and a provider) of its own: more than jest's 5 s on a loaded machine.
jest.setTimeout(30_000);

/**
 * The resilience layer end to end: Retry-After, the retry budget, the circuit
 * breaker and the deadline header, with the API in this process and the mock
 * provider as its own process. Each test starts the API with the knobs it is
 * about, so budgets and breakers never carry over from one test to the next.
 */
describe('provider resilience', () => {
  let provider: ProviderProcess;
  let api: InProcessStack | undefined;

  beforeAll(async () => {
    provider = await startProvider();
  });

  afterEach(async () => {
    await api?.stop();
    api = undefined;
  });

  afterAll(async () => {
    await provider?.stop();
  });

  async function start(overrides: Record<string, string> = {}, on: ProviderProcess = provider): Promise<void> {
    api = await startInProcessStack({
      provider: on,
      config: { PROVIDER_BACKOFF_BASE_MS: '50', PROVIDER_BACKOFF_CAP_MS: '200', ...overrides },
    });
  }

  function post(key: string, paymentMethod: string, apiKey = api!.apiKey) {
    return request(api!.url)
      .post('/v1/payments')
      .set('Authorization', `Bearer ${apiKey}`)
      .set('Idempotency-Key', key)
      .send({ amount: 500, currency: 'USD', payment_method: paymentMethod });
  }

  async function rows(): Promise<{ payments: number; keys: number }> {
    const [row] = await api!.dataSource.query(
      'SELECT (SELECT count(*)::int FROM payments) AS payments, (SELECT count(*)::int FROM idempotency_keys) AS keys',
    );
    return row;
  }

  /** The value of one Prometheus sample on the API's GET /metrics, 0 when absent. */
  async function metric(sample: string): Promise<number> {
    const text = await (await fetch(`${api!.metricsUrl}/metrics`)).text();
    const line = text.split('\n').find((l) => l.startsWith(`${sample} `));
    return line ? Number(line.slice(sample.length + 1)) : 0;
  }

  it('waits about a second on a 429 with Retry-After: 1, then succeeds', async () => {
    await start();
    const started = performance.now();

    const res = await post(randomUUID(), 'pm_card_rate_limited');

    const elapsed = performance.now() - started;
    expect(res.status).toBe(201);
    expect(res.body.status).toBe('succeeded');
    expect(elapsed).toBeGreaterThanOrEqual(950);
    expect(elapsed).toBeLessThan(3000);
    expect(await provider.chargesFor(res.body.id)).toHaveLength(1);
    expect(await metric('provider_attempts_total{operation="create_charge",outcome="throttled"}')).toBe(1);
  });

  it('fails fast once the retry budget is empty: 202, the payment pending, its key released', async () => {
    await start({ PROVIDER_RETRY_BUDGET_CAPACITY: '1', PROVIDER_RETRY_BUDGET_REFUND: '0' });

    const draining = await post(randomUUID(), 'pm_card_unavailable'); // its one retry empties the bucket
    const key = randomUUID();
    const res = await post(key, 'pm_card_flaky'); // would succeed on its third attempt

    expect(draining.status).toBe(202);
    expect(res.status).toBe(202);
    expect(res.headers['retry-after']).toMatch(/^\d+$/);
    expect(res.body.status).toBe('pending');
    // Two attempts for the first request, one for the second: no retry without a token.
    expect(await metric('provider_attempts_total{operation="create_charge",outcome="transient"}')).toBe(3);
    expect(await metric('provider_retries_total')).toBe(1);
    expect(await metric('provider_retry_budget_exhausted_total')).toBe(2);
    expect(await metric('provider_give_ups_total{reason="budget_exhausted"}')).toBe(2);
    const [stored] = await api!.dataSource.query(
      `SELECT p.status, k.response_status, k.leased_until
         FROM idempotency_keys k JOIN payments p ON p.id = k.payment_id WHERE k.key = $1`,
      [key],
    );
    expect(stored).toEqual({ status: 'pending', response_status: null, leased_until: null });
    expect(await provider.chargesFor(res.body.id)).toHaveLength(0);
  });

  it('answers 503 with Retry-After while the circuit is open, writing nothing, and lets a probe through later', async () => {
    await start({
      PROVIDER_BREAKER_MIN_CALLS: '1',
      PROVIDER_BREAKER_FAILURE_RATIO: '0.4',
      PROVIDER_BREAKER_HALF_OPEN_MS: '2000',
    });
    const finishedKey = randomUUID();
    const finished = await post(finishedKey, 'pm_card_ok');
    const tripping = await post(randomUUID(), 'pm_card_unavailable'); // one failed call in two opens it
    expect(tripping.status).toBe(202);
    const before = await rows();
    const chargesBefore = (await provider.charges()).length;
    const key = randomUUID();

    const refused = await post(key, 'pm_card_ok');

    expect(refused.status).toBe(503);
    expect(refused.headers['retry-after']).toMatch(/^[12]$/);
    expect(refused.body.error).toMatchObject({ type: 'api_error', code: 'provider_unavailable' });
    expect(await rows()).toEqual(before);
    expect((await provider.charges()).length).toBe(chargesBefore);
    expect(await metric('provider_breaker_state_changes_total{scope="client",to="open"}')).toBe(1);
    // A finished payment's answer needs no provider: its replay is served while the circuit is open.
    const replay = await post(finishedKey, 'pm_card_ok');
    expect(replay.status).toBe(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.text).toBe(finished.text);

    const probe = await eventually(
      async () => {
        const res = await post(key, 'pm_card_ok');
        return res.status === 503 ? undefined : res;
      },
      { timeoutMs: 5000, intervalMs: 200, what: 'the circuit to let a probe through' },
    );
    expect(probe.status).toBe(201);
    expect(await provider.chargesFor(probe.body.id)).toHaveLength(1);
    expect(await metric('provider_breaker_state_changes_total{scope="client",to="closed"}')).toBe(1);
  });

  it('postpones reconciliation while the worker’s circuit is open, without counting an attempt', async () => {
    await start();
    const pending = await post(randomUUID(), 'pm_card_unavailable');
    expect(pending.status).toBe(202);

    // First run: the lookup answers 404, the resubmission fails and opens the worker's circuit
    // for this client (one failed call in two; one counted attempt); the next run is refused by
    // the circuit and deferred for its minute.
    await api!.startWorker({
      PROVIDER_BREAKER_MIN_CALLS: '1',
      PROVIDER_BREAKER_FAILURE_RATIO: '0.4',
      PROVIDER_BREAKER_HALF_OPEN_MS: '60000',
      RECONCILE_INTERVAL_MS: '100',
      RECONCILE_STALE_AFTER_MS: '0',
      RECONCILE_BACKOFF_BASE_MS: '100',
      RECONCILE_BACKOFF_CAP_MS: '200',
    });
    const deferred = await eventually(
      async () => {
        const [row] = await api!.dataSource.query(
          `SELECT status, reconcile_attempts, next_reconcile_at > now() + interval '30 seconds' AS deferred
             FROM payments WHERE id = $1`,
          [pending.body.id],
        );
        return row.deferred ? row : undefined;
      },
      { what: 'the reconciliation to be deferred' },
    );
    expect(deferred).toEqual({ status: 'pending', reconcile_attempts: 1, deferred: true });
  });

  describe('one client cannot exhaust the provider for the others', () => {
    /** Each client's payments one after another, the clients side by side. */
    async function payments(apiKey: string, paymentMethod: string, count: number): Promise<number[]> {
      const statuses: number[] = [];
      for (let i = 0; i < count; i++) statuses.push((await post(randomUUID(), paymentMethod, apiKey)).status);
      return statuses;
    }

    it('leaves client B at 201 while client A’s payments keep failing, and opens only A’s circuit', async () => {
      await start({ PROVIDER_BREAKER_HALF_OPEN_MS: '60000' });
      const a = await createClient(api!.dataSource, 'client A');

      // 12 failing payments of three attempts each: enough to open the per-process breaker of
      // old (10 consecutive failed attempts) three times over.
      const opening = await payments(a.apiKey, 'pm_card_unavailable', 12);
      // A keeps failing while B pays.
      const [fromA, fromB] = await Promise.all([
        payments(a.apiKey, 'pm_card_unavailable', 12),
        payments(api!.apiKey, 'pm_card_ok', 12),
      ]);

      expect(fromB).toEqual(Array(12).fill(201));
      // A's own circuit opened after its fifth failed call: from then on A is refused, before any work.
      expect(opening).toEqual([...Array(5).fill(202), ...Array(7).fill(503)]);
      expect(fromA).toEqual(Array(12).fill(503));
      expect(await metric('provider_breaker_state_changes_total{scope="client",to="open"}')).toBe(1);
      expect(await metric('provider_breaker_state_changes_total{scope="provider",to="open"}')).toBe(0);
    });

    it('keeps client B’s retries when client A’s flaky payments have spent A’s budget', async () => {
      await start();
      const a = await createClient(api!.dataSource, 'client A');

      // Two retries each: A's sixth flaky payment finds A's bucket (10 tokens) empty.
      const fromA = await payments(a.apiKey, 'pm_card_flaky', 6);
      const fromB = await payments(api!.apiKey, 'pm_card_flaky', 2);

      expect(fromA).toEqual([201, 201, 201, 201, 201, 202]);
      expect(fromB).toEqual([201, 201]);
      expect(await metric('provider_retry_budget_exhausted_total')).toBe(1);
    });

    it('still opens the circuit for every client when the provider is down for all', async () => {
      const down = await startProvider({ PROVIDER_FAILURE_RATE: '1' });
      try {
        await start({ PROVIDER_BREAKER_HALF_OPEN_MS: '60000' }, down);
        const a = await createClient(api!.dataSource, 'client A');
        const c = await createClient(api!.dataSource, 'client C');

        // A and B fail until their own circuits open; C has made no payment at all.
        const [fromA, fromB] = await Promise.all([
          payments(a.apiKey, 'pm_card_ok', 6),
          payments(api!.apiKey, 'pm_card_ok', 6),
        ]);

        expect(fromA.slice(0, 5)).toEqual(Array(5).fill(202));
        expect(fromB.slice(0, 5)).toEqual(Array(5).fill(202));
        for (const apiKey of [a.apiKey, api!.apiKey, c.apiKey]) {
          const refused = await post(randomUUID(), 'pm_card_ok', apiKey);
          expect(refused.status).toBe(503);
          expect(refused.body.error.code).toBe('provider_unavailable');
          expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
        }
        expect(await metric('provider_breaker_state_changes_total{scope="provider",to="open"}')).toBe(1);
      } finally {
        await api?.stop();
        api = undefined;
        await down.stop();
      }
    });
  });

  describe('deadline propagation', () => {
    let slow: ProviderProcess;

    beforeAll(async () => {
      slow = await startProvider({ PROVIDER_LATENCY_MS: '500', LOG_LEVEL: 'info' });
    });

    afterAll(async () => {
      await slow?.stop();
    });

    const charge = (deadlineMs?: string) => {
      const req = request(slow.url)
        .post('/charges')
        .set('Idempotency-Key', `pk_${randomUUID()}`)
        .send({ amount: 500, currency: 'USD', payment_method: 'pm_card_ok', reference: `pay_${randomUUID()}` });
      return deadlineMs === undefined ? req : req.set('X-Request-Deadline-Ms', deadlineMs);
    };

    it('the mock provider refuses, recording nothing, a charge whose caller stopped waiting', async () => {
      const late = await charge('200');
      const inTime = await charge('5000');
      const noDeadline = await charge();

      expect(late.status).toBe(504);
      expect(late.body.error.code).toBe('deadline_exceeded');
      expect(inTime.status).toBe(201);
      expect(noDeadline.status).toBe(201);
      const references = (await slow.charges()).map((c) => c.reference);
      expect(references).toEqual(expect.arrayContaining([inTime.body.reference, noDeadline.body.reference]));
      expect(references).toHaveLength(2);
    });

    it('the API sends each attempt’s wait; the provider drops an attempt it cannot serve in time', async () => {
      await start({ PROVIDER_TIMEOUT_MS: '250', PROVIDER_MAX_ATTEMPTS: '1' }, slow);

      const res = await post(randomUUID(), 'pm_card_ok');

      expect(res.status).toBe(202);
      const requestId = res.headers['x-request-id'];
      type Entry = { msg?: string; waitMs?: number; req?: { id?: string } };
      const dropped = await eventually(
        async () =>
          slow
            .output()
            .map((line) => JSON.parse(line) as Entry)
            .find((entry) => entry.req?.id === requestId && entry.msg?.startsWith('caller stopped waiting')),
        { what: 'the provider to drop the abandoned attempt' },
      );
      expect(dropped.waitMs).toBe(250);
      expect(await slow.chargesFor(res.body.id)).toHaveLength(0);
    });
  });
});
