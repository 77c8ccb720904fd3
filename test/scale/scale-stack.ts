import type { DataSource } from 'typeorm';
import {
  type ApiProcess,
  type ProviderProcess,
  type WorkerProcess,
  startApiProcess,
  startProvider,
  startWorkerProcess,
} from '../support/processes';
import { emptyTables } from '../support/scratch-database';
import { WebhookReceiver } from '../support/webhook-receiver';
import { loadConfig } from '../../src/config/app-config';
import { createDataSource } from '../../src/database/data-source';
import { eventually } from '../support/eventually';
import { PaymentsClient, type Reply } from '../support/process-stack';
import { TEST_DATABASE_URL, assertTestDatabase, createClient } from '../support/test-env';

type Env = Record<string, string>;

/**
 * Knobs under which every failure recovers within seconds: a dead request's
 * key frees after 1.5 s, workers sweep every 200 ms with no staleness wait,
 * and a failed webhook send is retried within a second.
 */
export const FAST_KNOBS = {
  NODE_ENV: 'test',
  LOG_LEVEL: 'info',
  SHUTDOWN_GRACE_MS: '3000',
  IDEMPOTENCY_LEASE_MS: '1500',
  PROVIDER_TIMEOUT_MS: '800',
  PROVIDER_DEADLINE_MS: '1000',
  RECONCILE_INTERVAL_MS: '200',
  RECONCILE_STALE_AFTER_MS: '0',
  RECONCILE_BACKOFF_BASE_MS: '200',
  RECONCILE_BACKOFF_CAP_MS: '400',
  WEBHOOK_DISPATCH_INTERVAL_MS: '150',
  WEBHOOK_TIMEOUT_MS: '1000',
  WEBHOOK_BACKOFF_BASE_MS: '200',
  WEBHOOK_BACKOFF_CAP_MS: '1000',
};

export interface ScaleStackOptions {
  /** The spec's own connection, to read what the processes wrote (default: TEST_DATABASE_URL). */
  databaseUrl?: string;
  /** What every API and worker gets on top of FAST_KNOBS and the provider's URL: the database, Redis. */
  env: Env;
  providerEnv?: Env;
  apis: number;
  workers: number;
}

/**
 * The provider, APIs and workers as real processes on the test database, and
 * one merchant whose webhook endpoint is a loopback receiver that verifies
 * every signature. `db` is a connection of the spec's own, to read what the
 * processes wrote.
 */
export class ScaleStack {
  db!: DataSource;
  provider!: ProviderProcess;
  apis: ApiProcess[] = [];
  workers: WorkerProcess[] = [];
  receiver!: WebhookReceiver;
  clients: PaymentsClient[] = [];
  env!: Env;

  async start(options: ScaleStackOptions): Promise<void> {
    const databaseUrl = options.databaseUrl ?? TEST_DATABASE_URL;
    assertTestDatabase(databaseUrl);
    this.db = await createDataSource(loadConfig({ ...options.env, DATABASE_URL: databaseUrl })).initialize();
    await emptyTables(this.db);
    this.receiver = await WebhookReceiver.start();
    const merchant = await createClient(this.db, 'scale shop', { webhookUrl: this.receiver.url('shop') });
    this.receiver.trust('shop', merchant.webhookSecret!);
    this.provider = await startProvider({ LOG_LEVEL: 'warn', ...options.providerEnv });
    this.env = { ...FAST_KNOBS, PROVIDER_URL: this.provider.url, ...options.env };
    this.apis = await Promise.all(Array.from({ length: options.apis }, () => startApiProcess(this.env)));
    this.workers = await Promise.all(Array.from({ length: options.workers }, () => startWorkerProcess(this.env)));
    this.clients = this.apis.map((api) => new PaymentsClient(api.url, merchant.apiKey));
  }

  async stop(): Promise<void> {
    await Promise.all([...this.apis, ...this.workers].map((child) => child.stop()));
    await this.provider?.stop();
    await this.receiver?.close();
    await this.db?.destroy();
  }

  /** Polls until no payment is pending. */
  async settled(timeoutMs: number): Promise<void> {
    await eventually(
      async () => {
        const [{ pending }] = (await this.db.query(`SELECT count(*)::int AS pending FROM payments WHERE status = 'pending'`)) as {
          pending: number;
        }[];
        return pending === 0 ? true : undefined;
      },
      { timeoutMs, intervalMs: 100, what: 'every payment to be final' },
    );
  }

  /**
   * Polls until every event in the events table got a 2xx at the merchant's
   * endpoint, with a verified signature; resolves with the event ids.
   */
  async eventsDelivered(timeoutMs: number): Promise<string[]> {
    return eventually(
      async () => {
        const events = ((await this.db.query('SELECT id FROM events')) as { id: string }[]).map((row) => row.id);
        const delivered = new Set(
          this.receiver
            .receipts('shop')
            .filter((receipt) => receipt.answer === 204 && receipt.verified)
            .map((receipt) => receipt.webhookId),
        );
        return events.length > 0 && events.every((id) => delivered.has(id)) ? events : undefined;
      },
      { timeoutMs, intervalMs: 100, what: 'every event to get a 2xx at the merchant endpoint' },
    );
  }

  /** Every payment with its status and how many charges the provider holds for it. */
  async ledger(): Promise<{ id: string; status: string; charges: number }[]> {
    const charges = await this.provider.charges();
    const rows = (await this.db.query('SELECT id, status FROM payments ORDER BY id')) as { id: string; status: string }[];
    return rows.map((row) => ({ ...row, charges: charges.filter((charge) => charge.reference === row.id).length }));
  }

  /** Every final payment's status has its event (one per status change), announced under one event id. */
  async eventsByPayment(): Promise<Map<string, string[]>> {
    const rows = (await this.db.query('SELECT payment_id, type FROM events ORDER BY created_at')) as {
      payment_id: string;
      type: string;
    }[];
    const byPayment = new Map<string, string[]>();
    for (const { payment_id: paymentId, type } of rows) byPayment.set(paymentId, [...(byPayment.get(paymentId) ?? []), type]);
    return byPayment;
  }
}

export const payment = (paymentMethod: string, amount = 1_250) => ({ amount, currency: 'USD', payment_method: paymentMethod });

/** The status and code of a reply, for messages: `201`, `409 idempotency_key_in_use`. */
export const answer = (reply: Reply): string => `${reply.status}${reply.body.error ? ` ${reply.body.error.code}` : ''}`;
