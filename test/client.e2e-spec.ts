import { type IncomingHttpHeaders, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  DeclineError,
  type GiveUpInfo,
  type Payment,
  PaymentsClient,
  PendingAtDeadlineError,
  PaymentsClientError,
  RefundFailedError,
} from '../client/src/index.js';
import { eventually } from './support/eventually';
import { ProcessStack } from './support/process-stack';
import type { ApiProcess, Charge, WorkerProcess } from './support/processes';
import { freePort } from './support/private-redis';
import { createClient } from './support/test-env';

jest.setTimeout(90_000);

/** The contract's settings: what a team would configure. */
const CLIENT_SETTINGS = { maxRetries: 4, deadlineMs: 30_000, retryBudget: { ratio: 0.1, burst: 10 } } as const;

const PAYMENTS = 200;
const CONCURRENCY = 20;
/** The API is killed once this many payments have ended: mid-run, with about CONCURRENCY in flight. */
const KILL_AFTER = 60;
/** What each payment is made with: mostly good cards, and the provider's own faults beside its 30 % of 503s. */
const METHODS = ['pm_card_ok', 'pm_card_ok', 'pm_card_ok', 'pm_card_ok', 'pm_card_ok', 'pm_card_ok', 'pm_card_declined', 'pm_card_lost_response', 'pm_card_flaky', 'pm_card_ok'];

type Outcome = { payment: Payment } | { error: unknown };

/**
 * The client library (client/) against the real API, worker and mock
 * provider as processes, as a team would run it: the provider failing 30 %
 * of its calls, the API SIGKILLed mid-run and started again on its port.
 */
describe('the client library against the live stack', () => {
  let stack: ProcessStack;
  let api: ApiProcess;
  let worker: WorkerProcess;
  let port: number;

  beforeAll(async () => {
    // pm_card_pending settles after 1 s, well within the worker's ladder (30 attempts, each a 30 % chance of a 503).
    stack = new ProcessStack({ client: 'client library', apis: 0, providerEnv: { PROVIDER_FAILURE_RATE: '0.3', PROVIDER_PENDING_SETTLE_MS: '1000' } });
    await stack.start();
    port = await freePort();
    [api, worker] = await Promise.all([stack.startApi({ PORT: String(port) }), stack.startWorker({ RECONCILE_MAX_ATTEMPTS: '30' })]);
  });

  beforeEach(() => stack.reset());

  afterAll(async () => {
    await Promise.all([api?.stop(), worker?.stop()]);
    await stack?.stop();
  });

  it('200 payments through a 30 % failing provider and an API crash: each charged exactly once and final, no give-up silent', async () => {
    const giveUps: GiveUpInfo[] = [];
    let unanswered = 0;
    let inFlight = 0;
    const counting: typeof fetch = (input, init) => {
      inFlight++;
      return fetch(input, init)
        .catch((error: unknown) => {
          unanswered++;
          throw error;
        })
        .finally(() => inFlight--);
    };
    const client = new PaymentsClient({ baseUrl: api.url, apiKey: stack.apiKey, ...CLIENT_SETTINGS, fetch: counting, onGiveUp: (info) => giveUps.push(info) });
    const bodies = Array.from({ length: PAYMENTS }, (_, n) => ({ amount: 100 + n, currency: 'EUR' as const, payment_method: METHODS[n % METHODS.length] }));
    const outcomes: Outcome[] = [];
    let next = 0;
    let ended = 0;
    const pay = async (body: (typeof bodies)[number], idempotencyKey?: string): Promise<Outcome> => {
      try {
        return { payment: await client.payments.create(body, { idempotencyKey }) };
      } catch (error) {
        if (error instanceof DeclineError) return { payment: error.payment };
        return { error };
      }
    };
    const lane = async () => {
      while (next < PAYMENTS) {
        const n = next++;
        outcomes[n] = await pay(bodies[n]);
        ended++;
      }
    };
    const load = Promise.all(Array.from({ length: CONCURRENCY }, lane));

    // Killed with a request in flight: the lanes may all be waiting out a Retry-After at once.
    await eventually(async () => (ended >= KILL_AFTER && inFlight > 0 ? true : undefined), {
      timeoutMs: 30_000,
      what: `${KILL_AFTER} payments ended and a request in flight`,
    });
    await api.kill();
    api = await stack.startApi({ PORT: String(port) });
    await load;

    // The crash was felt: requests in flight were cut, and the next were refused until the API was back.
    expect(unanswered).toBeGreaterThan(0);
    // Every call that rejected told onGiveUp, once, with what it rejected with.
    const failed = outcomes.flatMap((outcome, n) => ('error' in outcome ? [{ n, error: outcome.error }] : []));
    const told = new Set(giveUps.map((info) => info.lastError));
    expect(giveUps).toHaveLength(failed.length);
    expect(failed.filter(({ error }) => !told.has(error)).map(({ n, error }) => `${n}: ${String(error)}`)).toEqual([]);
    expect(failed.filter(({ error }) => !(error instanceof PaymentsClientError))).toEqual([]);
    for (const info of giveUps) {
      expect(info).toMatchObject({ operation: 'payments.create', idempotencyKey: expect.any(String) });
      expect(['deadline', 'max_retries', 'budget_exhausted']).toContain(info.reason);
    }
    // What a team does with a give-up: the same operation again later, with the key the error carries,
    // until it has a final answer. A resumed call can give up again (the provider still fails 30 % of
    // calls, and the instance's retry budget refills only as first attempts come), so rounds repeat
    // until none is left, within a deadline.
    let resuming = failed.map(({ n, error }) => ({ n, key: (error as PaymentsClientError).idempotencyKey }));
    await eventually(
      async () => {
        const round = await Promise.all(resuming.map(async ({ n, key }) => ({ n, key, outcome: await pay(bodies[n], key) })));
        for (const { n, outcome } of round) outcomes[n] = outcome;
        resuming = round.filter(({ outcome }) => 'error' in outcome).map(({ n, key }) => ({ n, key }));
        return resuming.length === 0 ? true : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 500, what: 'every given-up payment, resumed with its key, to end final' },
    );

    const payments = outcomes.map((outcome, n) => {
      if ('error' in outcome) throw new Error(`payment ${n} still failed after its give-up was resumed: ${String(outcome.error)}`);
      return outcome.payment;
    });
    expect(new Set(payments.map((payment) => payment.id)).size).toBe(PAYMENTS);
    expect(payments.filter((payment) => payment.status !== 'succeeded' && payment.status !== 'failed')).toEqual([]);
    expect(payments.filter((payment, n) => (payment.status === 'failed') !== (bodies[n].payment_method === 'pm_card_declined'))).toEqual([]);
    const [{ n: rows }] = (await stack.db.query(`SELECT count(*)::int AS n FROM payments`)) as { n: number }[];
    expect(rows).toBe(PAYMENTS);

    // The provider's ledger: one charge per payment, of its outcome.
    const charges = new Map<string, Charge[]>();
    for (const charge of await stack.provider.charges()) charges.set(charge.reference, [...(charges.get(charge.reference) ?? []), charge]);
    expect(payments.filter((payment) => charges.get(payment.id)?.length !== 1).map((payment) => [payment.id, charges.get(payment.id)?.length ?? 0])).toEqual([]);
    expect(payments.filter((payment) => charges.get(payment.id)![0].status !== payment.status)).toEqual([]);
    expect(charges.size).toBe(PAYMENTS);
  });

  it('refunds, lists and events, and verifies a webhook the worker delivered', async () => {
    const deliveries: { body: Buffer; headers: IncomingHttpHeaders }[] = [];
    const receiver = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        deliveries.push({ body: Buffer.concat(chunks), headers: request.headers });
        response.writeHead(204).end();
      });
    });
    await new Promise<void>((listening) => receiver.listen(0, '127.0.0.1', listening));
    try {
      const merchant = await createClient(stack.db, 'client library webhooks', {
        webhookUrl: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`,
      });
      const client = new PaymentsClient({ baseUrl: api.url, apiKey: merchant.apiKey, ...CLIENT_SETTINGS });

      const paid = await client.payments.create({ amount: 1_000, currency: 'USD', payment_method: 'pm_card_ok' });
      const refunded = await client.refunds.create({ payment: paid.id, amount: 400 });
      const refusing = await client.payments.create({ amount: 700, currency: 'USD', payment_method: 'pm_card_refund_fails' });
      const refused = await client.refunds.create({ payment: refusing.id }).catch((error: unknown) => error);

      expect(paid).toMatchObject({ object: 'payment', status: 'succeeded' });
      expect(refunded).toMatchObject({ object: 'refund', status: 'succeeded', payment: paid.id, amount: 400 });
      expect(await client.refunds.retrieve(refunded.id)).toEqual(refunded);
      expect(await client.payments.retrieve(paid.id)).toMatchObject({ amount_refunded: 400 });
      expect(refused).toBeInstanceOf(RefundFailedError);
      expect((refused as RefundFailedError).refund).toMatchObject({ payment: refusing.id, status: 'failed' });

      const listed: string[] = [];
      for await (const payment of client.payments.list({ limit: 1 })) listed.push(payment.id);
      expect(listed).toEqual([refusing.id, paid.id]);
      const events = await eventually(async () => {
        const seen = [];
        for await (const event of client.events.list({ type: 'payment.succeeded', limit: 1 })) seen.push(event);
        return seen.length === 2 ? seen : undefined;
      });
      expect(events.map((event) => (event.data.object as Payment).id)).toEqual([refusing.id, paid.id]);

      // The worker's deliveries, verified with the secret client:create printed.
      const delivered = await eventually(async () => (deliveries.length >= 4 ? deliveries : undefined), { timeoutMs: 20_000, what: 'webhook deliveries' });
      const verified = delivered.map(({ body, headers }) => client.webhooks.verify(body, headers, merchant.webhookSecret!));
      expect(new Set(verified.map((event) => event.type))).toEqual(new Set(['payment.succeeded', 'refund.succeeded', 'refund.failed']));
      expect(() => client.webhooks.verify(delivered[0].body, delivered[0].headers, `whsec_${Buffer.from('another secret').toString('base64')}`)).toThrow(
        /no webhook-signature matches/,
      );
    } finally {
      await new Promise((closed) => receiver.close(closed));
    }
  });

  it('a payment still pending at its deadline is reported with the payment, and the same key finishes it later', async () => {
    const giveUps: GiveUpInfo[] = [];
    const client = new PaymentsClient({ baseUrl: api.url, apiKey: stack.apiKey, ...CLIENT_SETTINGS, deadlineMs: 1_500, onGiveUp: (info) => giveUps.push(info) });

    // pm_card_pending: the provider settles the charge later; the API answers 202 until then.
    const error = await client.payments.create({ amount: 900, currency: 'USD', payment_method: 'pm_card_pending' }).catch((caught: unknown) => caught);

    expect(error).toBeInstanceOf(PendingAtDeadlineError);
    const pending = error as PendingAtDeadlineError;
    expect(pending).toMatchObject({ reason: 'deadline', payment: { status: 'pending' } });
    expect(giveUps).toEqual([expect.objectContaining({ reason: 'deadline', lastError: error })]);
    const patient = new PaymentsClient({ baseUrl: api.url, apiKey: stack.apiKey, ...CLIENT_SETTINGS });
    const final = await patient.payments.create({ amount: 900, currency: 'USD', payment_method: 'pm_card_pending' }, { idempotencyKey: pending.idempotencyKey });
    expect(final).toMatchObject({ id: pending.payment!.id, status: 'succeeded' });
  });
});
