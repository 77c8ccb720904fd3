import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { eventually } from './support/eventually';
import { firstUlidAt } from '../src/common/ulid';
import { useInProcessStack } from './support/in-process-app';
import { type WorkerProcess, startWorkerProcess } from './support/processes';
import { processedMessages } from './support/provider-events';
import { createClient } from './support/test-env';
import { WebhookReceiver } from './support/webhook-receiver';

jest.setTimeout(60_000);

/**
 * Retention end to end: a worker process prunes events once they are older
 * than EVENTS_RETENTION_DAYS and every delivery of theirs is settled, with
 * their deliveries, and processed provider messages once older than
 * PROCESSED_MESSAGES_RETENTION_DAYS; an event still being delivered is kept
 * until its delivery settles. Payments stay.
 */
describe('retention', () => {
  /** 0.0001 days: 8.64 s. */
  const RETENTION = { EVENTS_RETENTION_DAYS: '0.0001', PROCESSED_MESSAGES_RETENTION_DAYS: '0.0001' };
  const RETENTION_MS = 8_640;
  const stack = useInProcessStack({ client: 'retention', providerEvents: true, config: RETENTION });
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

  async function merchant(name: string): Promise<{ id: string; apiKey: string; endpoint: string }> {
    const endpoint = `${name}-${randomUUID()}`;
    const created = await createClient(stack.dataSource, name, { webhookUrl: receiver.url(endpoint) });
    receiver.trust(endpoint, created.webhookSecret!);
    return { id: created.id, apiKey: created.apiKey, endpoint };
  }

  async function pay(apiKey: string): Promise<string> {
    const reply = await request(stack.url)
      .post('/v1/payments')
      .set('Authorization', `Bearer ${apiKey}`)
      .set('Idempotency-Key', randomUUID())
      .send({ amount: 700, currency: 'EUR', payment_method: 'pm_card_ok' });
    expect(reply.status).toBe(201);
    return reply.body.id as string;
  }

  const events = (apiKey: string, query: Record<string, string> = {}) =>
    request(stack.url).get('/v1/events').query({ limit: '100', ...query }).set('Authorization', `Bearer ${apiKey}`);
  const count = async (sql: string, params: unknown[]): Promise<number> =>
    ((await stack.dataSource.query(sql, params)) as { n: number }[])[0].n;
  const eventsOf = (clientId: string) => count(`SELECT count(*)::int AS n FROM events WHERE client_id = $1`, [clientId]);
  const deliveriesOf = (clientId: string) => count(`SELECT count(*)::int AS n FROM webhook_deliveries WHERE client_id = $1`, [clientId]);

  it('prunes old events with their settled deliveries and old processed messages, and keeps an event still being delivered', async () => {
    const served = await merchant('served');
    const down = await merchant('down');
    receiver.behave(down.endpoint, () => 500);
    worker = await startWorkerProcess({
      QUEUE_PREFIX: stack.config.queuePrefix,
      PROVIDER_URL: stack.provider.url,
      WORKER_METRICS_PORT: '0',
      LOG_LEVEL: 'info',
      ...RETENTION,
      RETENTION_PRUNE_INTERVAL_MS: '200',
      RETENTION_PRUNE_BATCH_SIZE: '2',
      WEBHOOK_DISPATCH_INTERVAL_MS: '100',
      WEBHOOK_BACKOFF_BASE_MS: '100',
      WEBHOOK_BACKOFF_CAP_MS: '300',
    });

    const servedPayments = [await pay(served.apiKey), await pay(served.apiKey), await pay(served.apiKey)];
    const downPayments = [await pay(down.apiKey), await pay(down.apiKey)];
    const madeAt = Date.now();
    const servedEvents = ((await stack.dataSource.query(`SELECT id FROM events WHERE client_id = $1`, [served.id])) as { id: string }[]).map(
      (row) => row.id,
    );
    expect(servedEvents).toHaveLength(3);
    await eventually(async () => ((await processedMessages(stack.dataSource)) >= 5 ? true : undefined), {
      what: 'the provider’s charge events recorded as processed',
    });
    // Still within the retention: nothing pruned yet.
    expect(await eventsOf(served.id)).toBe(3);
    expect(Date.now() - madeAt).toBeLessThan(RETENTION_MS);
    expect(await deliveriesOf(served.id)).toBe(3);

    // Past the retention, in batches of 2: the served merchant's events and deliveries, and every processed message.
    await eventually(
      async () =>
        (await eventsOf(served.id)) === 0 && (await deliveriesOf(served.id)) === 0 && (await processedMessages(stack.dataSource)) === 0
          ? true
          : undefined,
      { timeoutMs: RETENTION_MS * 3, what: 'the old events, deliveries and messages pruned' },
    );
    await worker.waitForLine(({ json }) => json?.msg === 'rows past their retention pruned');

    // The merchant whose endpoint fails still has its events: their deliveries are pending.
    expect(await eventsOf(down.id)).toBe(2);
    await eventually(async () => ((await events(down.apiKey)).body.data?.length === 2 ? true : undefined), {
      what: 'the kept events listed',
    });
    // Pruned events vanish from the list and their reads; a cursor naming one ends the list; payments stay.
    expect((await events(served.apiKey)).body).toEqual({ object: 'list', data: [], has_more: false });
    expect((await events(served.apiKey, { starting_after: servedEvents[0] })).body).toEqual({ object: 'list', data: [], has_more: false });
    const gone = await request(stack.url).get(`/v1/events/${servedEvents[0]}`).set('Authorization', `Bearer ${served.apiKey}`);
    expect(gone.status).toBe(404);
    for (const id of servedPayments) {
      const payment = await request(stack.url).get(`/v1/payments/${id}`).set('Authorization', `Bearer ${served.apiKey}`);
      expect(payment.body.status).toBe('succeeded');
    }
    // A cursor that cannot have named an event of the retention window is still refused.
    for (const never of [`evt_${'Z'.repeat(26)}`, `evt_${firstUlidAt(Date.now())}`]) {
      expect((await events(served.apiKey, { starting_after: never })).status).toBe(400);
    }

    // Once the endpoint answers, the kept events are delivered, and then pruned too.
    receiver.behave(down.endpoint, () => 204);
    await eventually(async () => ((await eventsOf(down.id)) === 0 ? true : undefined), {
      timeoutMs: 10_000,
      what: 'the kept events pruned once delivered',
    });
    const delivered = new Set(receiver.receipts(down.endpoint).filter((receipt) => receipt.answer === 204).map((r) => r.webhookId));
    expect(delivered.size).toBe(downPayments.length);
    expect(await deliveriesOf(down.id)).toBe(0);
  });
});
