import type { DataSource } from 'typeorm';
import { createDataSource } from '../../src/database/data-source';
import type { ManagedProcess, OutputLine } from '../../scripts/lib/processes';
import { TEST_DATABASE_URL, assertTestDatabase } from './test-env';

/**
 * What the e2e specs that run the API and the worker as real processes share:
 * their environment, a client that speaks HTTP to them, and the questions the
 * specs ask of the database and of the processes' logs.
 */

/** The environment of an API or worker child: the test database, logs on (kept by the harness). */
export function childEnv(overrides: Record<string, string>): Record<string, string> {
  assertTestDatabase(TEST_DATABASE_URL);
  return { NODE_ENV: 'test', LOG_LEVEL: 'info', DATABASE_URL: TEST_DATABASE_URL, ...overrides };
}

/** A connection of the spec's own to the test database, to look at what the processes wrote. */
export async function openTestDatabase(): Promise<DataSource> {
  assertTestDatabase(TEST_DATABASE_URL);
  return createDataSource({ databaseUrl: TEST_DATABASE_URL }).initialize();
}

/** What the specs read of a body: a payment, or the error envelope. */
export interface ReplyBody {
  id?: string;
  status?: string;
  provider_charge_id?: string | null;
  error?: { code: string };
}

export interface Reply {
  status: number;
  headers: Headers;
  /** The body exactly as sent, for byte-for-byte comparisons. */
  text: string;
  body: ReplyBody;
}

/** POST /v1/payments and GET /v1/payments/:id against a running API, as one client. */
export class PaymentsClient {
  constructor(
    readonly baseUrl: string,
    private readonly apiKey: string,
  ) {}

  post(key: string, payload: object): Promise<Reply> {
    return this.send('POST', '/v1/payments', { 'Idempotency-Key': key, 'Content-Type': 'application/json' }, payload);
  }

  get(paymentId: string): Promise<Reply> {
    return this.send('GET', `/v1/payments/${paymentId}`);
  }

  private async send(method: string, path: string, headers: Record<string, string> = {}, payload?: object): Promise<Reply> {
    const response = await fetch(`${this.baseUrl}${path}`, {
      method,
      headers: { Authorization: `Bearer ${this.apiKey}`, ...headers },
      body: payload === undefined ? undefined : JSON.stringify(payload),
    });
    const text = await response.text();
    return { status: response.status, headers: response.headers, text, body: (text ? JSON.parse(text) : {}) as ReplyBody };
  }
}

/** The line CrashPoint writes just before it signals its process; resolves with the payment it was working on. */
export async function crashPointReached(child: ManagedProcess, point: string): Promise<string> {
  const line = await child.waitForLine(({ json }) => json?.msg === 'crash point reached' && json.crashPoint === point);
  return line.json!.paymentId as string;
}

/** Matches a JSON log line with this msg about this payment. */
export const logged =
  (msg: string, paymentId: string) =>
  ({ json }: OutputLine): boolean =>
    json?.msg === msg && json.paymentId === paymentId;

/**
 * Knobs for a stack whose failures recover within one test: a dead request's
 * key frees up after 1.5 s (config wants the lease longer than the provider
 * deadline, so the provider client's budget shrinks with it), and workers
 * sweep every 100 ms with no staleness wait on a short ladder.
 */
export const FAST_API_KNOBS = {
  IDEMPOTENCY_LEASE_MS: '1500',
  PROVIDER_TIMEOUT_MS: '800',
  PROVIDER_DEADLINE_MS: '1000',
};
export const FAST_WORKER_KNOBS = {
  ...FAST_API_KNOBS,
  RECONCILE_INTERVAL_MS: '100',
  RECONCILE_STALE_AFTER_MS: '0',
  RECONCILE_BACKOFF_BASE_MS: '200',
  RECONCILE_BACKOFF_CAP_MS: '400',
};
