import { randomUUID } from 'node:crypto';
import { type IncomingHttpHeaders, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { DataSource } from 'typeorm';
import { createDataSource } from '../src/database/data-source';
import { eventually } from './support/eventually';
import { OtlpReceiver, type ReceivedSpan } from './support/otlp-receiver';
import { PaymentsClient } from './support/process-stack';
import { freePort } from './support/private-redis';
import {
  type ApiProcess,
  type ProviderProcess,
  type WorkerProcess,
  startApiProcess,
  startProvider,
  startWorkerProcess,
} from './support/processes';
import { emptyTables } from './support/scratch-database';
import { TEST_DATABASE_URL, assertTestDatabase, createClient, dropQueue, testConfig, uniqueQueuePrefix } from './support/test-env';

/**
 * The contract's traces, from the three real processes exporting OTLP/HTTP to
 * a receiver here: one payment's story is one trace, across API → provider,
 * API → (stored context) → worker's reconcile → provider, and provider event
 * → API. The trace of a payment is read from its row's trace_parent, the
 * context its creating request stored.
 */

jest.setTimeout(60_000);

const SERVER = 2;
const SETTLE_MS = 1_500;

/** The request path a server span answered, whichever semantic conventions the instrumentation follows. */
function pathOf(span: ReceivedSpan): string {
  return String(span.attributes['url.path'] ?? span.attributes['http.target'] ?? '');
}

describe('OpenTelemetry traces across the API, the worker and the mock provider', () => {
  const receiver = new OtlpReceiver();
  const queuePrefix = uniqueQueuePrefix();
  let db: DataSource;
  let provider: ProviderProcess;
  let api: ApiProcess;
  let worker: WorkerProcess;
  let client: PaymentsClient;

  beforeAll(async () => {
    assertTestDatabase(TEST_DATABASE_URL);
    await receiver.start();
    db = await createDataSource({ databaseUrl: TEST_DATABASE_URL }).initialize();
    await emptyTables(db);
    const otel = { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_BSP_SCHEDULE_DELAY: '100' };
    const apiPort = await freePort();
    provider = await startProvider({
      ...otel,
      PROVIDER_WEBHOOK_URL: `http://127.0.0.1:${apiPort}/v1/provider/events`,
      PROVIDER_PENDING_SETTLE_MS: String(SETTLE_MS),
    });
    const common = {
      ...otel,
      NODE_ENV: 'test',
      LOG_LEVEL: 'info',
      DATABASE_URL: TEST_DATABASE_URL,
      QUEUE_PREFIX: queuePrefix,
      PROVIDER_URL: provider.url,
      IDEMPOTENCY_LEASE_MS: '1500',
      PROVIDER_TIMEOUT_MS: '800',
      PROVIDER_DEADLINE_MS: '1000',
    };
    api = await startApiProcess({ ...common, PORT: String(apiPort) });
    worker = await startWorkerProcess({
      ...common,
      RECONCILE_INTERVAL_MS: '100',
      RECONCILE_STALE_AFTER_MS: '0',
      RECONCILE_BACKOFF_BASE_MS: '200',
      RECONCILE_BACKOFF_CAP_MS: '400',
    });
    client = new PaymentsClient(api.url, (await createClient(db, 'traces')).apiKey);
  });

  afterAll(async () => {
    await Promise.all([worker?.stop(), api?.stop(), provider?.stop()]);
    await dropQueue(testConfig({ QUEUE_PREFIX: queuePrefix }));
    await db?.destroy();
    await receiver.stop();
  });

  /** The trace id the payment's creating request stored with the row. */
  async function traceOf(paymentId: string): Promise<string> {
    const [row] = (await db.query('SELECT trace_parent FROM payments WHERE id = $1', [paymentId])) as { trace_parent: string | null }[];
    expect(row.trace_parent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$/);
    return row.trace_parent!.split('-')[1];
  }

  function spanIn(traceId: string, what: string, match: (span: ReceivedSpan) => boolean): Promise<ReceivedSpan> {
    return eventually(() => receiver.spans.find((span) => span.traceId === traceId && match(span)), {
      timeoutMs: 15_000,
      what,
    });
  }

  it('a payment that succeeds at once: the API, the provider and the provider event back to the API in one trace', async () => {
    const created = await client.post(randomUUID(), { amount: 300, currency: 'USD', payment_method: 'pm_card_ok' });
    expect(created.status).toBe(201);
    const traceId = await traceOf(created.body.id!);

    const apiRequest = await spanIn(traceId, "the API's POST /v1/payments", (span) =>
      span.service === 'payments-api' && span.kind === SERVER && pathOf(span) === '/v1/payments',
    );
    const providerCall = await spanIn(traceId, "the provider's server span", (span) =>
      span.service === 'mock-provider' && span.kind === SERVER,
    );
    const event = await spanIn(traceId, "the API's POST /v1/provider/events", (span) =>
      span.service === 'payments-api' && span.kind === SERVER && pathOf(span) === '/v1/provider/events',
    );
    // The API's request is the root: the client called it without a traceparent.
    expect(apiRequest.parentSpanId).toBe('');
    expect(providerCall.parentSpanId).not.toBe('');
    expect(event.parentSpanId).not.toBe('');
  });

  it('a pending payment: the worker reconciles it as a child of the request that left it pending', async () => {
    const created = await client.post(randomUUID(), { amount: 500, currency: 'USD', payment_method: 'pm_card_pending' });
    expect(created.status).toBe(202);
    const paymentId = created.body.id!;
    const traceId = await traceOf(paymentId);

    const reconcile = await spanIn(traceId, "the worker's reconcile span", (span) =>
      span.service === 'payments-worker' && span.name === 'reconcile payment',
    );
    expect(reconcile.attributes['payments.payment_id']).toBe(paymentId);
    expect(reconcile.parentSpanId).not.toBe('');
    // Its provider call is in the trace too: a provider server span whose parent is a worker span.
    const workerSpanIds = () => new Set(receiver.spans.filter((span) => span.service === 'payments-worker').map((span) => span.spanId));
    await spanIn(traceId, "the provider's answer to the worker", (span) =>
      span.service === 'mock-provider' && span.kind === SERVER && workerSpanIds().has(span.parentSpanId),
    );
    const settled = await eventually(
      async () => {
        const reply = await client.get(paymentId);
        return reply.body.status === 'succeeded' ? reply : undefined;
      },
      { timeoutMs: 15_000, what: 'the pending payment to settle' },
    );
    expect(settled.body.status).toBe('succeeded');
  });

  it("a merchant's webhook carries no trace context: the trace is ours, the merchant is another party", async () => {
    const received: IncomingHttpHeaders[] = [];
    const merchant = createServer((request, response) => {
      received.push(request.headers);
      request.resume().on('end', () => response.writeHead(204).end());
    });
    await new Promise<void>((listening) => merchant.listen(0, '127.0.0.1', listening));
    try {
      const webhookUrl = `http://127.0.0.1:${(merchant.address() as AddressInfo).port}/hooks`;
      const merchantClient = new PaymentsClient(api.url, (await createClient(db, 'traces merchant', { webhookUrl })).apiKey);
      const created = await merchantClient.post(randomUUID(), { amount: 700, currency: 'USD', payment_method: 'pm_card_ok' });
      expect(created.status).toBe(201);

      const [delivered] = await eventually(() => (received.length > 0 ? received : undefined), {
        timeoutMs: 15_000,
        what: "the merchant's webhook",
      });
      expect(delivered['webhook-id']).toBeDefined();
      expect(delivered.traceparent).toBeUndefined();
      expect(delivered.tracestate).toBeUndefined();
    } finally {
      merchant.closeAllConnections();
      await new Promise<void>((closed) => merchant.close(() => closed()));
    }
  });
});
