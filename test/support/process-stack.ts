import type { DataSource } from 'typeorm';
import {
  type ApiProcess,
  type HttpProcess,
  type ManagedProcess,
  type OutputLine,
  type ProviderProcess,
  type WorkerProcess,
  startApiProcess,
  startProvider,
  startWorkerProcess,
} from './processes';
import { emptyTables } from './scratch-database';
import { createDataSource } from '../../src/database/data-source';
import {
  TEST_DATABASE_URL,
  assertTestDatabase,
  createClient,
  dropQueue,
  testConfig,
  uniqueQueuePrefix,
} from './test-env';

/**
 * The API, the worker and the mock provider as real child processes, for
 * specs that kill, stall or stop them (in-process-app.ts runs the API inside
 * jest instead): the stack, a client that speaks HTTP to it, and the
 * questions the specs ask of the processes' logs.
 */

type Env = Record<string, string>;

/**
 * Knobs for a stack whose failures recover within one test: a dead request's
 * key frees up after 1.5 s (config wants the lease longer than the provider
 * deadline, so the provider client's budget shrinks with it), and workers
 * sweep every 100 ms with no staleness wait on a short ladder.
 */
const FAST_API_KNOBS = {
  IDEMPOTENCY_LEASE_MS: '1500',
  PROVIDER_TIMEOUT_MS: '800',
  PROVIDER_DEADLINE_MS: '1000',
};
const FAST_WORKER_KNOBS = {
  ...FAST_API_KNOBS,
  RECONCILE_INTERVAL_MS: '100',
  RECONCILE_STALE_AFTER_MS: '0',
  RECONCILE_BACKOFF_BASE_MS: '200',
  RECONCILE_BACKOFF_CAP_MS: '400',
};

/** What the specs read of a body: a payment, or the error envelope. */
export interface ReplyBody {
  id?: string;
  status?: string;
  provider_charge_id?: string | null;
  /** A decline (402 card_declined) carries its failed payment. */
  error?: { code: string; payment?: { id: string; status: string } };
}

export interface Reply {
  status: number;
  headers: Headers;
  /** The body exactly as sent, for byte-for-byte comparisons. */
  text: string;
  body: ReplyBody;
}

/** POST /v1/payments and GETs against a running API, as one client. */
export class PaymentsClient {
  constructor(
    readonly baseUrl: string,
    private readonly apiKey: string,
  ) {}

  /** With a `signal`, the request is abandoned (and rejects) when it aborts. */
  post(key: string, payload: object, signal?: AbortSignal): Promise<Reply> {
    return this.send('POST', '/v1/payments', { 'Idempotency-Key': key, 'Content-Type': 'application/json' }, payload, signal);
  }

  /** POST /v1/refunds, as post() does for payments. */
  refund(key: string, payload: object, signal?: AbortSignal): Promise<Reply> {
    return this.send('POST', '/v1/refunds', { 'Idempotency-Key': key, 'Content-Type': 'application/json' }, payload, signal);
  }

  get(paymentId: string): Promise<Reply> {
    return this.getPath(`/v1/payments/${paymentId}`);
  }

  /** Any GET under the API, with this client's key: `/v1/events?type=…`. */
  getPath(path: string): Promise<Reply> {
    return this.send('GET', path);
  }

  private async send(
    method: string,
    path: string,
    headers: Record<string, string> = {},
    payload?: object,
    signal?: AbortSignal,
  ): Promise<Reply> {
    const response = await fetch(`${this.baseUrl}${path}`, {
      method,
      headers: { Authorization: `Bearer ${this.apiKey}`, ...headers },
      body: payload === undefined ? undefined : JSON.stringify(payload),
      signal,
    });
    const text = await response.text();
    return { status: response.status, headers: response.headers, text, body: (text ? JSON.parse(text) : {}) as ReplyBody };
  }
}

export interface ProcessStackOptions {
  /** The provider's env on top of LOG_LEVEL=info: specs read its request log. */
  providerEnv?: Env;
  /** How many API processes the tests of the file share. */
  apis?: number;
  /** The shared API processes' env on top of the stack's. */
  apiEnv?: Env;
  /** The name of the API client made for each test. */
  client: string;
}

/**
 * The provider and the shared API processes, a queue prefix of their own, a
 * connection of the spec's own to the test database (to look at what the
 * processes wrote), and before each test emptied tables and a fresh client.
 */
export class ProcessStack {
  readonly queuePrefix = uniqueQueuePrefix();
  db!: DataSource;
  provider!: ProviderProcess;
  apis: ApiProcess[] = [];
  apiKey!: string;
  /** The client made for this test. */
  clientId!: string;
  /** One per API in `apis`, with this test's key. */
  clients: PaymentsClient[] = [];

  constructor(private readonly options: ProcessStackOptions) {}

  /** For specs with one shared API. */
  get api(): ApiProcess {
    return this.apis[0];
  }

  get client(): PaymentsClient {
    return this.clients[0];
  }

  async start(): Promise<void> {
    assertTestDatabase(TEST_DATABASE_URL);
    this.db = await createDataSource({ databaseUrl: TEST_DATABASE_URL }).initialize();
    this.provider = await startProvider({ LOG_LEVEL: 'info', ...this.options.providerEnv });
    this.apis = await Promise.all(Array.from({ length: this.options.apis ?? 1 }, () => this.startApi(this.options.apiEnv)));
  }

  async reset(): Promise<void> {
    await emptyTables(this.db);
    ({ apiKey: this.apiKey, id: this.clientId } = await createClient(this.db, this.options.client));
    this.clients = this.apis.map((api) => this.clientOf(api));
  }

  async stop(): Promise<void> {
    await Promise.all([...this.apis.map((api) => api.stop()), this.provider?.stop()]);
    await dropQueue(testConfig({ QUEUE_PREFIX: this.queuePrefix }));
    await this.db?.destroy();
  }

  /** Another API process on this stack; the test that starts it stops it. */
  startApi(env: Env = {}): Promise<ApiProcess> {
    return startApiProcess(this.childEnv({ ...FAST_API_KNOBS, ...env }));
  }

  /** A worker process on this stack; the test that starts it stops it. */
  startWorker(env: Env = {}): Promise<WorkerProcess> {
    return startWorkerProcess(this.childEnv({ ...FAST_WORKER_KNOBS, ...env }));
  }

  /** A client of any API process, with this test's key. */
  clientOf(api: HttpProcess): PaymentsClient {
    return new PaymentsClient(api.url, this.apiKey);
  }

  /** The test database, logs on (kept by the harness), this stack's queue and provider. */
  private childEnv(env: Env): Env {
    return {
      NODE_ENV: 'test',
      LOG_LEVEL: 'info',
      DATABASE_URL: TEST_DATABASE_URL,
      QUEUE_PREFIX: this.queuePrefix,
      PROVIDER_URL: this.provider.url,
      ...env,
    };
  }
}

/** A process stack for the enclosing describe block: started once, reset before each test. */
export function useProcessStack(options: ProcessStackOptions): ProcessStack {
  const stack = new ProcessStack(options);
  beforeAll(() => stack.start());
  beforeEach(() => stack.reset());
  afterAll(() => stack.stop());
  return stack;
}

/** The line CrashPoint writes just before it signals its process; resolves with the payment (or refund) it was working on. */
export async function crashPointReached(child: ManagedProcess, point: string): Promise<string> {
  const line = await child.waitForLine(({ json }) => json?.msg === 'crash point reached' && json.crashPoint === point);
  return (line.json!.paymentId ?? line.json!.refundId) as string;
}

/** Matches a JSON log line with this msg about this payment. */
export const logged =
  (msg: string, paymentId: string) =>
  ({ json }: OutputLine): boolean =>
    json?.msg === msg && json.paymentId === paymentId;
