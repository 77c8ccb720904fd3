import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import type { WorkerProcess } from './support/processes';
import { type PrivateRedis, startPrivateRedis } from './support/private-redis';
import { type Receipt, WebhookReceiver } from './support/webhook-receiver';
import type { EventResource } from '../src/merchant-events/event';
import { eventually } from './support/eventually';
import { PaymentsClient, useProcessStack } from './support/process-stack';
import { TEST_DATABASE_URL, createClient } from './support/test-env';

/**
 * Merchant events end to end: the API and the worker as processes, merchant
 * endpoints on a loopback receiver that verifies every signature. What a
 * merchant is promised: every final payment's event, at least once, under one
 * webhook-id, whatever fails on either side.
 */

jest.setTimeout(60_000);

/** A send gives up after 500 ms, so a claim lasts 2·500 + 5,000 ms: how long a killed worker's send waits. */
const WEBHOOK_KNOBS = {
  WEBHOOK_DISPATCH_INTERVAL_MS: '100',
  WEBHOOK_TIMEOUT_MS: '500',
  WEBHOOK_BACKOFF_BASE_MS: '100',
  WEBHOOK_BACKOFF_CAP_MS: '300',
  WEBHOOK_CONCURRENCY: '6',
  WEBHOOK_ENDPOINT_MAX_IN_FLIGHT: '2',
};

const payment = (paymentMethod = 'pm_card_ok') => ({ amount: 700, currency: 'EUR', payment_method: paymentMethod });

interface Merchant {
  id: string;
  endpoint: string;
  client: PaymentsClient;
}

describe('merchant events', () => {
  const stack = useProcessStack({ client: 'merchant events', providerEnv: { PROVIDER_PENDING_SETTLE_MS: '300' } });
  let receiver: WebhookReceiver;
  let worker: WorkerProcess | undefined;

  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
  });
  afterEach(async () => {
    await worker?.stop();
    worker = undefined;
  });
  afterAll(() => receiver?.close());

  /** A client with an endpoint of its own on the receiver, made as client:create makes one. */
  async function merchant(): Promise<Merchant> {
    const endpoint = `merchant-${randomUUID()}`;
    const created = await createClient(stack.db, endpoint, { webhookUrl: receiver.url(endpoint) });
    receiver.trust(endpoint, created.webhookSecret!);
    return { id: created.id, endpoint, client: new PaymentsClient(stack.api.url, created.apiKey) };
  }

  /** The payment's id: a 402 embeds the declined payment in its error. */
  async function pay(as: Merchant, paymentMethod?: string): Promise<string> {
    const reply = await as.client.post(randomUUID(), payment(paymentMethod));
    const id = reply.status === 402 ? (JSON.parse(reply.text) as { error: { payment: { id: string } } }).error.payment.id : reply.body.id;
    if (![201, 202, 402].includes(reply.status) || !id) throw new Error(`payment answered ${reply.status}: ${reply.text}`);
    return id;
  }

  const paymentOf = (receipt: Receipt) => (JSON.parse(receipt.body) as EventResource).data.object.id;
  const delivered = (as: Merchant) => receiver.receipts(as.endpoint).filter((receipt) => receipt.answer === 204);

  /** Resolves once every listed payment's event got a 2xx from the merchant's endpoint. */
  function untilDelivered(as: Merchant, paymentIds: string[], timeoutMs = 15_000): Promise<Receipt[]> {
    return eventually(
      () => {
        const receipts = delivered(as);
        const got = new Set(receipts.map(paymentOf));
        return paymentIds.every((id) => got.has(id)) ? receipts : undefined;
      },
      { timeoutMs, what: `${paymentIds.length} events delivered to ${as.endpoint}` },
    );
  }

  async function deliveryRow(eventId: string): Promise<{ status: string; attempts: number; last_error: string | null }> {
    const [row] = await stack.db.query(`SELECT status, attempts, last_error FROM webhook_deliveries WHERE event_id = $1`, [
      eventId,
    ]);
    return row;
  }

  it('pushes each final payment’s event once, signed, with webhook-id the event id and the body GET /v1/events/:id answers', async () => {
    worker = await stack.startWorker(WEBHOOK_KNOBS);
    const shop = await merchant();
    // Decided by the request (two of them) and by the worker (the pending one).
    const paid = await pay(shop);
    const declined = await pay(shop, 'pm_card_declined');
    const settledLater = await pay(shop, 'pm_card_pending');

    const receipts = await untilDelivered(shop, [paid, declined, settledLater]);

    expect(receipts).toHaveLength(3);
    const byPayment = new Map(receipts.map((receipt) => [paymentOf(receipt), JSON.parse(receipt.body) as EventResource]));
    expect(byPayment.get(paid)?.type).toBe('payment.succeeded');
    expect(byPayment.get(declined)?.type).toBe('payment.failed');
    expect(byPayment.get(settledLater)).toMatchObject({ type: 'payment.succeeded', data: { object: { status: 'succeeded' } } });
    for (const receipt of receipts) {
      expect(receipt.verified).toBe(true);
      const read = await shop.client.getPath(`/v1/events/${receipt.webhookId}`);
      expect(read.status).toBe(200);
      expect(read.text).toBe(receipt.body);
    }
    // Listed once the writes that started before it have ended: at once, unless a long one is open on the database.
    const list = await eventually(async () => {
      const read = await shop.client.getPath('/v1/events?type=payment.failed');
      return (read.body as unknown as { data: unknown[] }).data.length > 0 ? read : undefined;
    }, { what: 'the declined payment’s event in the list' });
    expect(list.body).toMatchObject({ object: 'list', has_more: false, data: [{ data: { object: { id: declined } } }] });
  });

  it('retries a failing endpoint under the same webhook-id and a valid signature until it answers 2xx', async () => {
    worker = await stack.startWorker(WEBHOOK_KNOBS);
    const shop = await merchant();
    receiver.behave(shop.endpoint, (attempt) => (attempt < 2 ? 503 : 204));

    const paid = await pay(shop);
    await untilDelivered(shop, [paid]);

    const attempts = receiver.receipts(shop.endpoint);
    expect(attempts.map((receipt) => receipt.answer)).toEqual([503, 503, 204]);
    expect(new Set(attempts.map((receipt) => receipt.webhookId)).size).toBe(1);
    expect(attempts.every((receipt) => receipt.verified)).toBe(true);
    await eventually(async () => ((await deliveryRow(attempts[0].webhookId)).status === 'delivered' ? true : undefined), {
      what: 'the delivery recorded as delivered',
    });
    expect(await deliveryRow(attempts[0].webhookId)).toMatchObject({ status: 'delivered', attempts: 3, last_error: null });
  });

  it('keeps an endpoint that never answers to its share of sends: another merchant’s events go out meanwhile', async () => {
    // A held send lasts 3 s: a healthy event queued behind one would be 3 s late.
    worker = await stack.startWorker({ ...WEBHOOK_KNOBS, WEBHOOK_TIMEOUT_MS: '3000' });
    const stalled = await merchant();
    const healthy = await merchant();
    receiver.behave(stalled.endpoint, () => 'hold');

    // More events for the stalled endpoint than the worker has sends.
    for (let i = 0; i < 10; i++) await pay(stalled);
    await eventually(() => (receiver.receipts(stalled.endpoint).length >= 2 ? true : undefined), {
      what: 'the stalled endpoint to hold its sends',
    });
    const startedAt = Date.now();
    const healthyPayments = [await pay(healthy), await pay(healthy), await pay(healthy)];
    const receipts = await untilDelivered(healthy, healthyPayments);

    // None waited behind the stalled sends.
    expect(Math.max(...receipts.map((receipt) => receipt.at)) - startedAt).toBeLessThan(2_000);
    expect(receiver.maxOpen(stalled.endpoint)).toBeLessThanOrEqual(2);
    expect(delivered(stalled)).toEqual([]);
  });

  it('fails a delivery once its horizon has passed, and sends it no more', async () => {
    // 0.0005 h is 1.8 s of retries.
    worker = await stack.startWorker({ ...WEBHOOK_KNOBS, WEBHOOK_RETRY_HORIZON_HOURS: '0.0005' });
    const shop = await merchant();
    receiver.behave(shop.endpoint, () => 500);

    await pay(shop);
    const first = await eventually(() => receiver.receipts(shop.endpoint)[0], { what: 'a first attempt' });
    const failed = await eventually(
      async () => {
        const row = await deliveryRow(first.webhookId);
        return row.status === 'failed' ? row : undefined;
      },
      { what: 'the delivery to fail' },
    );
    const attemptsMade = receiver.receipts(shop.endpoint).length;
    expect(failed).toMatchObject({ last_error: 'HTTP 500', attempts: attemptsMade });
    const gaveUp = await worker.waitForLine(({ json }) => json?.msg === 'webhook delivery failed for good');
    expect(gaveUp.json).toMatchObject({ eventId: first.webhookId });

    // A later event delivered proves dispatches ran since: none sent the failed one again.
    receiver.behave(shop.endpoint, () => 204);
    const later = await pay(shop);
    await untilDelivered(shop, [later]);
    expect(receiver.receipts(shop.endpoint).filter((receipt) => receipt.webhookId === first.webhookId)).toHaveLength(
      attemptsMade,
    );
    // The event stays listed for the merchant to catch up from.
    expect((await shop.client.getPath(`/v1/events/${first.webhookId}`)).status).toBe(200);

    // And the operator sees why.
    const shown = spawnSync(
      process.execPath,
      [join(__dirname, '..', 'dist', 'src', 'operator', 'webhook-deliveries.js'), '--client', shop.id, '--status', 'failed'],
      { env: { ...process.env, DATABASE_URL: TEST_DATABASE_URL, LOG_LEVEL: 'silent' }, encoding: 'utf8', timeout: 20_000 },
    );
    expect(shown.status).toBe(0);
    expect(shown.stdout.trim().split('\n').map((line) => JSON.parse(line) as unknown)).toEqual([
      expect.objectContaining({ eventId: first.webhookId, status: 'failed', attempts: attemptsMade, lastError: 'HTTP 500', inFlight: false }),
    ]);
  });

  it('sends again, under the same webhook-id, an event whose worker was killed between the 2xx and its record', async () => {
    const shop = await merchant();
    const crashing = await stack.startWorker({ ...WEBHOOK_KNOBS, CRASH_POINT: 'worker_mid_delivery' });
    const paid = await pay(shop);
    await crashing.waitForLine(({ json }) => json?.msg === 'crash point reached' && json.crashPoint === 'worker_mid_delivery');
    await crashing.stop();

    worker = await stack.startWorker(WEBHOOK_KNOBS);
    const receipts = await eventually(() => (delivered(shop).length >= 2 ? delivered(shop) : undefined), {
      timeoutMs: 20_000,
      what: 'the event sent again once the dead worker’s claim expired',
    });

    expect(receipts.map(paymentOf)).toEqual([paid, paid]);
    expect(receipts[0].webhookId).toBe(receipts[1].webhookId);
    await eventually(async () => ((await deliveryRow(receipts[0].webhookId)).status === 'delivered' ? true : undefined), {
      what: 'the delivery recorded',
    });
  });

  describe('with a Redis of its own', () => {
    let redis: PrivateRedis;
    beforeAll(async () => {
      redis = await startPrivateRedis();
    });
    afterAll(() => redis?.kill());

    it('delivers every event after Redis lost every job: Postgres says what is undelivered', async () => {
      worker = await stack.startWorker({ ...WEBHOOK_KNOBS, REDIS_URL: redis.url });
      const shop = await merchant();
      receiver.behave(shop.endpoint, () => 503);
      const paymentIds: string[] = [];
      for (let i = 0; i < 6; i++) paymentIds.push(await pay(shop));
      await eventually(() => (receiver.receipts(shop.endpoint).length >= 6 ? true : undefined), {
        what: 'attempts in flight and retries scheduled',
      });

      await redis.flushAll();
      receiver.behave(shop.endpoint, () => 204);

      const receipts = await untilDelivered(shop, paymentIds, 20_000);
      const idsByPayment = new Map<string, Set<string>>();
      for (const receipt of receiver.receipts(shop.endpoint)) {
        idsByPayment.set(paymentOf(receipt), (idsByPayment.get(paymentOf(receipt)) ?? new Set()).add(receipt.webhookId));
      }
      expect([...idsByPayment.values()].every((ids) => ids.size === 1)).toBe(true);
      expect(new Set(receipts.map(paymentOf))).toEqual(new Set(paymentIds));
    });
  });

  it('shows and sends a client its own events only', async () => {
    worker = await stack.startWorker(WEBHOOK_KNOBS);
    const alice = await merchant();
    const bob = await merchant();
    const alicePayment = await pay(alice);
    const bobPayment = await pay(bob);
    await untilDelivered(alice, [alicePayment]);
    await untilDelivered(bob, [bobPayment]);

    expect(receiver.receipts(alice.endpoint).map(paymentOf)).toEqual([alicePayment]);
    expect(receiver.receipts(bob.endpoint).map(paymentOf)).toEqual([bobPayment]);
    const [aliceEvent] = receiver.receipts(alice.endpoint);
    expect((await bob.client.getPath(`/v1/events/${aliceEvent.webhookId}`)).status).toBe(404);
    const bobList = await eventually(async () => {
      const read = await bob.client.getPath('/v1/events');
      return (read.body as unknown as { data: unknown[] }).data.length > 0 ? read : undefined;
    }, { what: 'bob’s event in his list' });
    expect((bobList.body as unknown as { data: EventResource[] }).data.map((event) => event.data.object.id)).toEqual([bobPayment]);
    const cursor = await bob.client.getPath(`/v1/events?starting_after=${aliceEvent.webhookId}`);
    expect(cursor.status).toBe(400);
    expect(cursor.body.error?.code).toBe('parameter_invalid');
  });
});
