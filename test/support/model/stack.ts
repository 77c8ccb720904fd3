import { randomBytes } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import { Webhook } from 'standardwebhooks';
import type { DataSource } from 'typeorm';
import { ClientsRepository } from '../../../src/clients/clients.repository';
import { ClientsService } from '../../../src/clients/clients.service';
import { signedWebhookRequest } from '../../../src/common/signed-webhook';
import { createDataSource } from '../../../src/database/data-source';
import type { Charge, ListedProviderEvent, Refund as ProviderRefund } from '../../../src/mock-provider/mock-provider.types';
import {
  type ApiProcess,
  type ManagedProcess,
  type ProviderProcess,
  type WorkerProcess,
  startApiProcess,
  startProvider,
  startWorkerProcess,
} from '../processes';
import { freePort } from '../private-redis';
import { dropWorkerQueues } from '../worker-queues';

/**
 * The real system under the model-based test (test/model.e2e-spec.ts and
 * `npm run model`): the mock provider, two API processes, a reconciliation
 * worker, and on demand API processes that die (SIGKILL) or freeze (SIGSTOP)
 * at a crash point, all real children on one database and a queue prefix of
 * the run's own. Each sequence of commands gets an API client of its own
 * (newClient), so sequences share the processes and never each other's rows
 * or keys; the database is never emptied.
 *
 * The two APIs differ in one knob: `a` keeps final answers in its replay
 * cache (REPLAY_CACHE_ENTRIES, the default), `b` and the crash-point APIs
 * read every replay from Postgres. A key expiry is made by moving the key's
 * expires_at into the past, which is what time passing does to Postgres;
 * only a key no caching process has seen is expired that way (see Model).
 */

type Env = Record<string, string>;

export type ApiCrashPoint = 'after_claim' | 'during_provider_call' | 'before_outcome';
export const API_CRASH_POINTS: readonly ApiCrashPoint[] = ['after_claim', 'during_provider_call', 'before_outcome'];

/** The timing knobs: short enough that a lease, a pending charge and a ladder end within a sequence. */
export const KNOBS = {
  leaseMs: 1_500,
  providerTimeoutMs: 500,
  providerDeadlineMs: 1_200,
  slowReplyMs: 800,
  pendingSettleMs: 700,
  webhookMaxDelayMs: 1_500,
  webhookDuplicateRate: 0.3,
} as const;

const API_KNOBS: Env = {
  IDEMPOTENCY_LEASE_MS: String(KNOBS.leaseMs),
  PROVIDER_TIMEOUT_MS: String(KNOBS.providerTimeoutMs),
  PROVIDER_DEADLINE_MS: String(KNOBS.providerDeadlineMs),
  PROVIDER_BACKOFF_BASE_MS: '20',
  PROVIDER_BACKOFF_CAP_MS: '100',
  // Thousands of requests per client in a long run's sequence are the test, not abuse.
  RATE_LIMIT_REQUESTS: '1000000',
  AUTH_FAILURE_LIMIT: '1000000',
};

const WORKER_KNOBS: Env = {
  ...API_KNOBS,
  RECONCILE_INTERVAL_MS: '100',
  RECONCILE_STALE_AFTER_MS: '250',
  RECONCILE_BACKOFF_BASE_MS: '100',
  RECONCILE_BACKOFF_CAP_MS: '300',
  RECONCILE_RATE_LIMIT: '0',
  KEY_PRUNE_INTERVAL_MS: '1000',
};

const REQUEST_TIMEOUT_MS = 20_000;

export type ApiName = 'a' | 'b';

export interface ModelStackOptions {
  databaseUrl: string;
  redisUrl: string;
  /** BullMQ prefix of the run's own, removed by stop(). */
  queuePrefix: string;
  progress?: (line: string) => void;
}

export interface Client {
  id: string;
  apiKey: string;
}

/** An HTTP answer as the model judges it: the bytes as sent, and what it reads of them. */
export interface Answer {
  status: number;
  text: string;
  /** The parsed body, or undefined when it is not JSON. */
  json: unknown;
  replayed: string | null;
  retryAfter: string | null;
}

/** What the model reads of the store, for one client, in one snapshot. */
export interface StoreSnapshot {
  payments: {
    id: string;
    status: string;
    amount: number;
    currency: string;
    payment_method: string;
    amount_reserved: number;
    amount_refunded: number;
    provider_charge_id: string | null;
  }[];
  refunds: { id: string; payment_id: string; status: string; amount: number; provider_refund_id: string | null }[];
  keys: {
    key: string;
    resource_id: string;
    response_status: number | null;
    response_body: string | null;
    expired: boolean;
  }[];
}

/** The worker: one process at a time, which the commands pause, kill or replace by one that dies mid-job. */
class WorkerSlot {
  private current?: WorkerProcess;
  private starting?: Promise<WorkerProcess>;
  private paused = false;
  /** Bumped by every replacement, so a watcher of an old process restarts nothing. */
  private generation = 0;
  kills = 0;
  crashes = 0;

  constructor(private readonly env: () => Env) {}

  /** A normal worker, started in the background; ensureRunning() waits for it. */
  startNormal(): void {
    const generation = ++this.generation;
    this.paused = false;
    this.starting = startWorkerProcess(this.env()).then((worker) => {
      if (generation !== this.generation) {
        void worker.stop(2_000);
        return worker;
      }
      this.current = worker;
      return worker;
    });
    this.starting.catch(() => undefined);
  }

  /** The worker runs, not paused, once this resolves. */
  async ensureRunning(): Promise<void> {
    for (let round = 0; round < 5; round++) {
      if (this.starting) await this.starting;
      const worker = this.current;
      if (worker && !(await exitedYet(worker))) {
        if (this.paused) {
          worker.resume();
          this.paused = false;
        }
        return;
      }
      this.startNormal();
    }
    throw new Error('the worker would not stay up');
  }

  /** SIGSTOP: it freezes mid-whatever, leases and job locks held, until resumed. */
  async pause(): Promise<void> {
    if (this.starting) await this.starting;
    if (this.current && !this.paused) {
      this.current.pause();
      this.paused = true;
    }
  }

  async resume(): Promise<void> {
    if (this.starting) await this.starting;
    if (this.current && this.paused) {
      this.current.resume();
      this.paused = false;
    }
  }

  /** SIGKILL wherever it is, then a new worker in the background. */
  async kill(): Promise<void> {
    if (this.starting) await this.starting;
    const worker = this.current;
    this.current = undefined;
    // A mid-job crasher's watcher must not take this kill for its crash.
    this.generation++;
    if (worker) {
      await worker.kill();
      this.kills++;
    }
    this.startNormal();
  }

  /**
   * Replaces the worker by one that SIGKILLs itself in its first reconcile
   * job, once it has taken the row's lease and asked the provider
   * (CRASH_POINT=worker_mid_job); when it dies, a normal worker takes over.
   */
  async replaceByMidJobCrasher(): Promise<void> {
    if (this.starting) await this.starting;
    const old = this.current;
    this.current = undefined;
    this.generation++;
    if (old) await old.kill();
    const generation = ++this.generation;
    this.paused = false;
    this.starting = startWorkerProcess({ ...this.env(), CRASH_POINT: 'worker_mid_job' }).then((worker) => {
      this.current = worker;
      void worker.exited.then(() => {
        if (generation !== this.generation) return;
        this.crashes++;
        this.current = undefined;
        this.startNormal();
      });
      return worker;
    });
    await this.starting;
  }

  async stop(): Promise<void> {
    this.generation++;
    const worker = this.current ?? (await this.starting?.catch(() => undefined));
    this.current = undefined;
    if (worker) await worker.stop(5_000);
  }
}

async function exitedYet(process: ManagedProcess): Promise<boolean> {
  const marker = Symbol('running');
  return (await Promise.race([process.exited, Promise.resolve(marker)])) !== marker;
}

/** The crash point lines a process has written so far. */
function crashLines(process: ManagedProcess, point: string): string[] {
  return process.output().filter((line) => line.includes('"crash point reached"') && line.includes(`"crashPoint":"${point}"`));
}

/** What a request sent to a crash-point API came to. */
export type CrashExchange =
  | { kind: 'answered'; answer: Answer }
  /** It reached the point: SIGKILLed (no answer) or frozen (answer pending). `id`: the payment or refund it was on. */
  | { kind: 'reached'; id: string; answer?: Promise<Answer | { error: string }> };

export class ModelStack {
  db!: DataSource;
  provider!: ProviderProcess;
  apis = {} as Record<ApiName, ApiProcess>;
  readonly webhookSecret = `whsec_${randomBytes(32).toString('base64')}`;
  /** A payment of another client: a refund of it must be 404, as for no payment at all. */
  foreignPaymentId!: string;
  readonly worker = new WorkerSlot(() => this.env(WORKER_KNOBS));
  private readonly killApis = new Map<ApiCrashPoint, Promise<ApiProcess>>();
  private readonly stallApis = new Map<ApiCrashPoint, Promise<ApiProcess>>();
  private readonly started: ManagedProcess[] = [];
  apiKills = 0;
  apiStalls = 0;
  private stopping = false;

  constructor(private readonly options: ModelStackOptions) {}

  private progress(line: string): void {
    this.options.progress?.(line);
  }

  private env(extra: Env): Env {
    return {
      NODE_ENV: 'test',
      LOG_LEVEL: 'warn',
      CRASH_POINT: '',
      DATABASE_URL: this.options.databaseUrl,
      DATABASE_DIRECT_URL: this.options.databaseUrl,
      REDIS_URL: this.options.redisUrl,
      QUEUE_PREFIX: this.options.queuePrefix,
      PROVIDER_WEBHOOK_SECRET: this.webhookSecret,
      METRICS_PORT: '0',
      WORKER_METRICS_PORT: '0',
      ...(this.provider && { PROVIDER_URL: this.provider.url }),
      ...extra,
    };
  }

  async start(): Promise<void> {
    this.db = await createDataSource({ databaseUrl: this.options.databaseUrl }).initialize();
    // The provider delivers its events to API a, whose port is chosen first.
    const portA = await freePort();
    this.provider = await startProvider({
      ...this.env({}),
      PROVIDER_WEBHOOK_URL: `http://127.0.0.1:${portA}/v1/provider/events`,
      PROVIDER_WEBHOOK_DUPLICATE_RATE: String(KNOBS.webhookDuplicateRate),
      PROVIDER_WEBHOOK_MAX_DELAY_MS: String(KNOBS.webhookMaxDelayMs),
      PROVIDER_SLOW_REPLY_MS: String(KNOBS.slowReplyMs),
      PROVIDER_PENDING_SETTLE_MS: String(KNOBS.pendingSettleMs),
    });
    this.started.push(this.provider);
    this.worker.startNormal();
    const [a, b] = await Promise.all([
      startApiProcess(this.env({ ...API_KNOBS, PORT: String(portA) })),
      startApiProcess(this.env({ ...API_KNOBS, REPLAY_CACHE_ENTRIES: '0' })),
    ]);
    this.apis = { a, b };
    this.started.push(a, b);
    await this.worker.ensureRunning();
    const foreign = await this.newClient('model foreign client');
    const paid = await this.post(this.apis.b.url, foreign, '/v1/payments', `foreign-${randomBytes(6).toString('hex')}`, {
      amount: 500,
      currency: 'EUR',
      payment_method: 'pm_card_ok',
    });
    if (paid.status !== 201) throw new Error(`the foreign client's payment answered ${paid.status}: ${paid.text}`);
    this.foreignPaymentId = (paid.json as { id: string }).id;
  }

  async stop(): Promise<void> {
    this.stopping = true;
    const crashApis = await Promise.all(
      [...this.killApis.values(), ...this.stallApis.values()].map((api) => api.catch(() => undefined)),
    );
    await Promise.all([
      this.worker.stop(),
      ...crashApis.map((api) => api?.stop(2_000)),
      ...this.started.map((process) => process.stop(5_000)),
    ]);
    await dropWorkerQueues(this.options.redisUrl, this.options.queuePrefix).catch(() => undefined);
    await this.db?.destroy();
  }

  async newClient(name = 'model sequence'): Promise<Client> {
    const client = await new ClientsService(new ClientsRepository(this.db)).create(name);
    return { id: client.id, apiKey: client.api_key };
  }

  /** POST a JSON body with an Idempotency-Key; an error (no answer) rejects. */
  async post(baseUrl: string, client: Client, path: string, key: string, body: object, signal?: AbortSignal): Promise<Answer> {
    const response = await fetch(`${baseUrl}${path}`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${client.apiKey}`, 'Idempotency-Key': key, 'Content-Type': 'application/json' },
      body: JSON.stringify(body),
      signal: signal ?? AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
    return answerOf(response);
  }

  async get(api: ApiName, client: Client, path: string): Promise<Answer> {
    const response = await fetch(`${this.apis[api].url}${path}`, {
      headers: { Authorization: `Bearer ${client.apiKey}` },
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
    return answerOf(response);
  }

  /** The API process that SIGKILLs itself at `point` (started when first needed, again after each death). */
  private killApi(point: ApiCrashPoint): Promise<ApiProcess> {
    let api = this.killApis.get(point);
    if (!api) {
      api = startApiProcess(this.env({ ...API_KNOBS, REPLAY_CACHE_ENTRIES: '0', CRASH_POINT: point }));
      this.killApis.set(point, api);
    }
    return api;
  }

  /** The API process that freezes (SIGSTOP) at `point`, until resumed; it serves again afterwards. */
  private stallApi(point: ApiCrashPoint): Promise<ApiProcess> {
    let api = this.stallApis.get(point);
    if (!api) {
      api = startApiProcess(
        this.env({ ...API_KNOBS, REPLAY_CACHE_ENTRIES: '0', CRASH_POINT: point, CRASH_POINT_SIGNAL: 'SIGSTOP' }),
      );
      this.stallApis.set(point, api);
      void api.then((started) =>
        started.exited.then((exit) => {
          if (!this.stopping) this.progress(`the API that freezes at ${point} (pid ${started.pid}) exited: ${JSON.stringify(exit)}\n${started.output().slice(-10).join('\n')}`);
        }),
      );
    }
    return api;
  }

  /**
   * Sends one request to the API that dies at `point`. When the request
   * reaches it, the process is SIGKILLed there with the request unanswered,
   * and a new one is started in the background for the next crash.
   */
  async sendToKillApi(point: ApiCrashPoint, client: Client, path: string, key: string, body: object): Promise<CrashExchange> {
    const api = await this.killApi(point);
    const before = crashLines(api, point).length;
    const sent = this.post(api.url, client, path, key, body).then(
      (answer) => answer,
      (error: Error) => ({ error: `${error.message}: ${(error as Error & { cause?: Error }).cause?.message ?? ''}` }),
    );
    const watch = { done: false };
    const reached = this.waitForCrashLine(api, point, before, watch);
    reached.catch(() => undefined);
    const first = await Promise.race([sent.then((result) => ({ sent: result })), reached.then((id) => ({ id }))]);
    if ('sent' in first && 'status' in first.sent) {
      watch.done = true;
      return { kind: 'answered', answer: first.sent };
    }
    // It reached the point (or died trying): the line says on what.
    const id = 'id' in first ? first.id : await reached;
    await api.exited;
    this.apiKills++;
    this.killApis.delete(point);
    void this.killApi(point).catch(() => undefined);
    return { kind: 'reached', id };
  }

  /**
   * Sends one request to the API that freezes at `point`. Returns once the
   * request is answered, or once the process froze at the point with the
   * answer still to come: resumeStalled(point) lets it go on.
   */
  async sendToStallApi(point: ApiCrashPoint, client: Client, path: string, key: string, body: object): Promise<CrashExchange> {
    const api = await this.stallApi(point);
    const before = crashLines(api, point).length;
    const sent = this.post(api.url, client, path, key, body).then(
      (answer) => answer,
      (error: Error) => ({ error: `${error.message}: ${(error as Error & { cause?: Error }).cause?.message ?? ''}` }),
    );
    const watch = { done: false };
    const reached = this.waitForCrashLine(api, point, before, watch);
    reached.catch(() => undefined);
    const first = await Promise.race([sent.then((result) => ({ sent: result })), reached.then((id) => ({ id }))]);
    if ('sent' in first) {
      watch.done = true;
      if ('status' in first.sent) return { kind: 'answered', answer: first.sent };
      throw new Error(`the stalling API at ${point} gave no answer: ${first.sent.error}`);
    }
    this.apiStalls++;
    return { kind: 'reached', id: first.id, answer: sent };
  }

  async resumeStalled(point: ApiCrashPoint): Promise<void> {
    const api = await this.stallApis.get(point);
    api?.resume();
  }

  /** Resumes every stalled API: a sequence that failed half-way leaves none frozen for the next. */
  async resumeAllStalled(): Promise<void> {
    for (const api of this.stallApis.values()) (await api.catch(() => undefined))?.resume();
  }

  /**
   * The id (payment or refund) of the `before`+1-th crash line at `point`;
   * rejects if the process exits first. Stops looking once `watch.done` is set.
   */
  private async waitForCrashLine(
    api: ApiProcess,
    point: ApiCrashPoint,
    before: number,
    watch: { done: boolean },
    timeoutMs = REQUEST_TIMEOUT_MS,
  ): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    while (!watch.done) {
      const lines = crashLines(api, point);
      if (lines.length > before) {
        const json = JSON.parse(lines[before]) as { paymentId?: string; refundId?: string };
        return (json.paymentId ?? json.refundId)!;
      }
      if (Date.now() > deadline) throw new Error(`no crash line at ${point} within ${timeoutMs} ms`);
      if (await exitedYet(api)) {
        // Its last lines are read before `exited` settles.
        const last = crashLines(api, point);
        if (last.length > before) continue;
        const exit = await api.exited;
        throw new Error(
          `the API at ${point} (pid ${api.pid}) exited (${JSON.stringify(exit)}) without a new crash line (it had written ${before}):\n${api.output().slice(-20).join('\n')}`,
        );
      }
      await delay(10);
    }
    return '';
  }

  /** The client's payments, refunds and keys, in one snapshot. */
  async snapshot(clientId: string): Promise<StoreSnapshot> {
    return this.db.transaction('REPEATABLE READ', async (tx) => {
      const payments = (await tx.query(
        `SELECT id, status, amount, currency, payment_method, amount_reserved, amount_refunded, provider_charge_id
           FROM payments WHERE client_id = $1`,
        [clientId],
      )) as StoreSnapshot['payments'];
      const refunds = (await tx.query(
        `SELECT id, payment_id, status, amount, provider_refund_id FROM refunds WHERE client_id = $1`,
        [clientId],
      )) as StoreSnapshot['refunds'];
      const keys = (await tx.query(
        `SELECT key, COALESCE(payment_id, refund_id) AS resource_id, response_status, response_body,
                COALESCE(expires_at <= now(), false) AS expired
           FROM idempotency_keys WHERE client_id = $1`,
        [clientId],
      )) as StoreSnapshot['keys'];
      return { payments, refunds, keys };
    });
  }

  /** Rows of the client still undecided (pending or in review). */
  async undecided(clientId: string): Promise<number> {
    const [{ n }] = (await this.db.query(
      `SELECT (SELECT count(*) FROM payments WHERE client_id = $1 AND status IN ('pending', 'requires_review'))
            + (SELECT count(*) FROM refunds WHERE client_id = $1 AND status IN ('pending', 'requires_review')) AS n`,
      [clientId],
    )) as { n: string }[];
    return Number(n);
  }

  /** The amount of a refund row, for a refund whose request died before answering. */
  async refundAmount(clientId: string, refundId: string): Promise<number | undefined> {
    const [row] = (await this.db.query('SELECT amount FROM refunds WHERE client_id = $1 AND id = $2', [clientId, refundId])) as {
      amount: number;
    }[];
    return row?.amount;
  }

  /** What time passing does to a key with its final answer: moves its expiry into the past. True if the key was so. */
  async expireKey(clientId: string, key: string): Promise<boolean> {
    const [{ n }] = (await this.db.query(
      `WITH expired AS (
         UPDATE idempotency_keys SET expires_at = now() - interval '1 second'
          WHERE client_id = $1 AND key = $2 AND completed_at IS NOT NULL
          RETURNING 1
       )
       SELECT count(*)::int AS n FROM expired`,
      [clientId, key],
    )) as { n: number }[];
    return n === 1;
  }

  async providerCharges(): Promise<Charge[]> {
    return this.provider.charges();
  }

  async providerRefunds(): Promise<ProviderRefund[]> {
    return this.provider.refunds();
  }

  async providerEvents(): Promise<ListedProviderEvent[]> {
    return (await this.provider.events()) as ListedProviderEvent[];
  }

  /** Delivers a provider event (again) as the provider does: signed, with a fresh timestamp. */
  async deliverEvent(api: ApiName, event: ListedProviderEvent): Promise<Answer> {
    const { delivered: _delivered, attempts: _attempts, ...sent } = event;
    const request = signedWebhookRequest(new Webhook(this.webhookSecret), event.id, JSON.stringify(sent), new Date());
    const response = await fetch(`${this.apis[api].url}/v1/provider/events`, {
      method: 'POST',
      headers: request.headers,
      body: request.body,
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
    return answerOf(response);
  }
}

async function answerOf(response: Response): Promise<Answer> {
  const text = await response.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return {
    status: response.status,
    text,
    json,
    replayed: response.headers.get('idempotent-replayed'),
    retryAfter: response.headers.get('retry-after'),
  };
}
