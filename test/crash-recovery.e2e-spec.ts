import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import type { CrashPointName } from '../src/config/app-config';
import type { ApiProcess, WorkerProcess } from './support/processes';
import { IdempotencyRepository } from '../src/ledger/idempotency.repository';
import { Ledger } from '../src/ledger/ledger.service';
import { PAYMENTS } from '../src/ledger/operations';
import { OperationsRepository } from '../src/ledger/operations.repository';
import { eventually } from './support/eventually';
import { type Reply, crashPointReached, logged, useProcessStack } from './support/process-stack';
import { testConfig } from './support/test-env';

/**
 * A payment survives its API process or its worker dying at every phase
 * boundary (CRASH_POINT, common/crash-point.ts): the API, the worker and the
 * mock provider are real processes, and the crashing one is SIGKILLed where
 * CRASH_POINT says, with no clean-up. Whether the client comes back or not,
 * the payment ends final, charged once, with its answer stored on the key.
 * A process that stalls instead is fenced off; one that is stopped drains.
 */
jest.setTimeout(30_000);

/**
 * Every provider call is in flight this long (inside the stack's provider
 * deadline), so a request can die with the provider still working on it.
 */
const PROVIDER_LATENCY_MS = '300';

type ApiCrashPoint = Exclude<CrashPointName, 'worker_mid_job' | 'worker_mid_delivery'>;

/** Where each point leaves the provider: whether it holds the charge by the time recovery starts. */
const API_CRASH_POINTS: [ApiCrashPoint, { charged: boolean }][] = [
  ['after_claim', { charged: false }],
  ['during_provider_call', { charged: true }],
  ['before_outcome', { charged: true }],
];

const payload = (paymentMethod = 'pm_card_ok') => ({ amount: 1250, currency: 'EUR', payment_method: paymentMethod });

describe('API and worker processes that die, stall or are stopped', () => {
  const stack = useProcessStack({
    providerEnv: { PROVIDER_LATENCY_MS, PROVIDER_PENDING_SETTLE_MS: '1000', PROVIDER_SLOW_REPLY_MS: '600' },
    client: 'crash test shop',
  });

  /** One API process per crash point, started together to save time; each dies on the first payment it handles. */
  async function startCrashingApis(): Promise<Map<ApiCrashPoint, ApiProcess>> {
    return new Map(
      await Promise.all(
        API_CRASH_POINTS.map(async ([point]) => [point, await stack.startApi({ CRASH_POINT: point })] as const),
      ),
    );
  }

  /**
   * Sends one payment to the API process that dies at `point`; the client
   * never hears back. Returns the key and the payment the process was on.
   */
  async function crashApiAt(crashingApis: Map<ApiCrashPoint, ApiProcess>, point: ApiCrashPoint, charged: boolean) {
    const crashing = crashingApis.get(point)!;
    const key = randomUUID();
    const answer = stack.clientOf(crashing).post(key, payload()).then(
      () => 'answered',
      () => 'no answer',
    );
    const paymentId = await crashPointReached(crashing, point);

    expect(await crashing.exited).toEqual({ code: null, signal: 'SIGKILL' });
    expect(await answer).toBe('no answer');
    expect(await stateOf(paymentId)).toEqual({ status: 'pending', stored: false, leased: true });
    if (charged) {
      await eventually(async () => ((await stack.provider.chargesFor(paymentId)).length === 1 ? true : undefined), {
        what: 'the provider to record the charge of the dead request',
      });
    } else {
      expect(await stack.provider.chargesFor(paymentId)).toEqual([]);
    }
    return { key, paymentId };
  }

  async function stateOf(paymentId: string) {
    const [row] = (await stack.db.query(
      `SELECT p.status, k.response_body IS NOT NULL AS stored, k.leased_until > now() AS leased
         FROM payments p JOIN idempotency_keys k ON k.payment_id = p.id
        WHERE p.id = $1`,
      [paymentId],
    )) as { status: string; stored: boolean; leased: boolean | null }[];
    return row;
  }

  /** Retries until the lease of whoever died holding the key has expired and the retry gets a final answer. */
  const retryUntilFinal = (key: string, body = payload()) =>
    eventually(
      async () => {
        const reply = await stack.client.post(key, body);
        return reply.status === 409 || reply.status === 202 ? undefined : reply;
      },
      { what: 'a final answer to the retry' },
    );

  /** One payment, charged once under its own provider key, and that charge is the one the answer names. */
  async function expectChargedOnce(paymentId: string, answer: Reply) {
    const charges = await stack.provider.chargesFor(paymentId);
    expect(charges).toHaveLength(1);
    expect(charges[0]).toMatchObject({ idempotency_key: `pk_${paymentId}`, status: 'succeeded' });
    expect(answer.body.provider_charge_id).toBe(charges[0].id);
    expect(await stack.db.query('SELECT id FROM payments')).toEqual([{ id: paymentId }]);
  }

  async function expectReplayed(key: string, answer: Reply, body = payload()) {
    const replay = await stack.client.post(key, body);
    expect(replay.status).toBe(answer.status);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.text).toBe(answer.text);
  }

  describe('the client retries with the same key once the lease has expired', () => {
    let crashingApis: Map<ApiCrashPoint, ApiProcess>;

    beforeAll(async () => {
      crashingApis = await startCrashingApis();
    });

    afterAll(async () => {
      await Promise.all([...(crashingApis?.values() ?? [])].map((crashing) => crashing.kill()));
    });

    it.each(API_CRASH_POINTS)('API killed at %s: the retry resumes the same payment', async (point, { charged }) => {
      const { key, paymentId } = await crashApiAt(crashingApis, point, charged);

      const early = await stack.client.post(key, payload());
      const resumed = await retryUntilFinal(key);

      expect(early.status).toBe(409);
      expect(early.body.error?.code).toBe('idempotency_key_in_use');
      expect(resumed.status).toBe(201);
      expect(resumed.headers.get('idempotent-replayed')).toBeNull();
      expect(resumed.body).toMatchObject({ id: paymentId, status: 'succeeded' });
      await stack.api.waitForLine(logged('resuming payment', paymentId));
      await expectChargedOnce(paymentId, resumed);
      await expectReplayed(key, resumed);
    });

    it('worker killed mid-job (lease taken, provider asked, nothing recorded): the retry resumes the payment', async () => {
      const crashing = await stack.startWorker({ CRASH_POINT: 'worker_mid_job' });
      const key = randomUUID();
      const pending = await stack.client.post(key, payload('pm_card_pending'));
      const paymentId = await crashPointReached(crashing, 'worker_mid_job');

      expect(pending.status).toBe(202);
      expect(paymentId).toBe(pending.body.id);
      expect(await crashing.exited).toEqual({ code: null, signal: 'SIGKILL' });
      expect(await stateOf(paymentId)).toEqual({ status: 'pending', stored: false, leased: true });
      expect((await stack.client.post(key, payload('pm_card_pending'))).status).toBe(409);

      const resumed = await retryUntilFinal(key, payload('pm_card_pending'));

      expect(resumed.status).toBe(201);
      expect(resumed.body).toMatchObject({ id: paymentId, status: 'succeeded' });
      await expectChargedOnce(paymentId, resumed);
      await expectReplayed(key, resumed, payload('pm_card_pending'));
    });

    /**
     * The lease can outlive a live request only if the request stalls outside
     * the provider call: config keeps the provider's deadline inside the
     * lease. So the stall here is the process itself, frozen with SIGSTOP
     * after the provider answered, as a long GC pause or a frozen VM would.
     */
    it('a request stalled past its lease is fenced off: one outcome, and both clients get the same answer', async () => {
      const stalling = await stack.startApi({ CRASH_POINT: 'before_outcome', CRASH_POINT_SIGNAL: 'SIGSTOP' });
      try {
        const key = randomUUID();
        const stalled = stack.clientOf(stalling).post(key, payload());
        const paymentId = await crashPointReached(stalling, 'before_outcome');

        const takeover = await retryUntilFinal(key);
        const [outcome] = await stack.db.query('SELECT status, updated_at FROM payments WHERE id = $1', [paymentId]);
        stalling.resume();
        const late = await stalled;

        expect(takeover.status).toBe(201);
        expect(takeover.headers.get('idempotent-replayed')).toBeNull();
        expect(takeover.body).toMatchObject({ id: paymentId, status: 'succeeded' });
        await stalling.waitForLine(({ json }) => json?.msg === 'lease lost before the outcome was recorded' && json.key === key);
        expect(late.status).toBe(201);
        expect(late.headers.get('idempotent-replayed')).toBe('true');
        expect(late.text).toBe(takeover.text);
        expect(await stack.db.query('SELECT status, updated_at FROM payments WHERE id = $1', [paymentId])).toEqual([outcome]);
        await expectChargedOnce(paymentId, takeover);
      } finally {
        await stalling.stop();
      }
    });
    it('a request stalled past its lease before its provider call never charges a payment someone else decided', async () => {
      const stalling = await stack.startApi({ CRASH_POINT: 'after_claim', CRASH_POINT_SIGNAL: 'SIGSTOP' });
      try {
        const key = randomUUID();
        const stalled = stack.clientOf(stalling).post(key, payload());
        const paymentId = await crashPointReached(stalling, 'after_claim');

        // Someone else takes the expired lease and decides the payment without
        // the provider ever seeing it, as an operator resolving it would.
        const keys = new IdempotencyRepository();
        const [{ clientId }] = await stack.db.query('SELECT client_id AS "clientId" FROM idempotency_keys WHERE key = $1', [key]);
        const decider = { clientId, key, token: randomUUID() };
        await eventually(async () => ((await keys.takeOverLease(stack.db.manager, decider, PAYMENTS, paymentId, 30_000)) ? true : undefined), {
          what: 'the stalled request’s lease to expire',
        });
        const ledger = new Ledger(stack.db, keys, new OperationsRepository(), testConfig());
        const payment = await ledger.find(PAYMENTS, { clientId, id: paymentId });
        const decided = await ledger.recordOutcome(PAYMENTS, decider, payment!, {
          status: 'failed',
          providerId: null,
          failureCode: 'decided_elsewhere',
          failureMessage: 'Decided while the request was stalled.',
          resolution: { by: 'crash test', reason: 'the provider never saw it' },
        });
        stalling.resume();
        const late = await stalled;

        expect(decided?.response?.status).toBe(402);
        await stalling.waitForLine(({ json }) => json?.msg === 'lease lost before the outcome was recorded' && json.key === key);
        expect(late.headers.get('idempotent-replayed')).toBe('true');
        expect(late.text).toBe(decided?.response?.body);
        expect(await stack.provider.chargesFor(paymentId)).toEqual([]);
      } finally {
        await stalling.stop();
      }
    });
  });

  it.each([
    ['the process’s first for its client: through the pipeline', false],
    ['after one: answered before the framework', true],
  ])('SIGTERM: the payment in flight (%s) finishes with its final answer, then the API exits 0', async (_path, afterOne) => {
    const draining = await stack.startApi({
      PROVIDER_TIMEOUT_MS: '2000',
      PROVIDER_DEADLINE_MS: '2500',
      IDEMPOTENCY_LEASE_MS: '3000',
    });
    const client = stack.clientOf(draining);
    // The API key is known to the process after its first request (a read will do), and the creates after it are answered early.
    if (afterOne) expect((await client.get('pay_01JZZZZZZZZZZZZZZZZZZZZZZZ')).status).toBe(404);
    // pm_card_timeout holds its reply PROVIDER_SLOW_REPLY_MS on top of the latency.
    const inFlight = client.post(randomUUID(), payload('pm_card_timeout'));
    await eventually(async () => ((await stack.db.query('SELECT 1 FROM payments')).length === 1 ? true : undefined), {
      what: 'the payment to be claimed, its provider call under way',
    });

    const exit = await draining.stop();
    const answer = await inFlight;

    expect(answer.status).toBe(201);
    expect(answer.body.status).toBe('succeeded');
    expect(exit).toEqual({ code: 0, signal: null });
    await expectChargedOnce(answer.body.id!, answer);
  });

  describe('no client ever retries: the worker finishes the payment and stores its answer on the key', () => {
    let worker: WorkerProcess;
    let crashingApis: Map<ApiCrashPoint, ApiProcess>;

    beforeAll(async () => {
      [worker, crashingApis] = await Promise.all([stack.startWorker(), startCrashingApis()]);
    });

    afterAll(async () => {
      await Promise.all([worker?.stop(), ...[...(crashingApis?.values() ?? [])].map((crashing) => crashing.kill())]);
    });

    it.each(API_CRASH_POINTS)('API killed at %s: reconciled, and a late retry replays it', async (point, { charged }) => {
      const { key, paymentId } = await crashApiAt(crashingApis, point, charged);

      const settled = await eventually(
        async () => {
          const reply = await stack.client.get(paymentId);
          return reply.body.status === 'pending' ? undefined : reply;
        },
        { what: 'the worker to settle the payment' },
      );
      const late = await stack.client.post(key, payload());

      expect(settled.body.status).toBe('succeeded');
      await worker.waitForLine(logged('payment reconciled', paymentId));
      expect(late.status).toBe(201);
      expect(late.headers.get('idempotent-replayed')).toBe('true');
      expect(late.body).toEqual(settled.body);
      await expectChargedOnce(paymentId, late);
      await expectReplayed(key, late);
    });
  });
});

describe('CRASH_POINT in production', () => {
  it.each(['main.js', 'worker.js'])('%s refuses to start, with one line naming the variable', (entry) => {
    const result = spawnSync(process.execPath, [join(__dirname, '..', 'dist', 'src', entry)], {
      env: { ...process.env, NODE_ENV: 'production', CRASH_POINT: 'after_claim' },
      encoding: 'utf8',
      timeout: 20_000,
    });

    expect(result.status).toBe(1);
    expect(result.stderr.trim().split('\n')).toEqual([
      'Invalid configuration: CRASH_POINT must not be set when NODE_ENV is production (got "after_claim")',
    ]);
  });
});
