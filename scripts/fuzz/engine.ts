import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import type { DataSource } from 'typeorm';
import { ClientsRepository } from '../../src/clients/clients.repository';
import { ClientsService } from '../../src/clients/clients.service';
import { createDataSource } from '../../src/database/data-source';
import { SecretBox } from '../../src/common/secret-box';
import { parseIdempotencyKey } from '../../src/idempotency/idempotency-key';
import { dropWorkerQueues } from '../../test/support/worker-queues';
import { type ApiProcess, type ProviderProcess, type WorkerProcess, startApiProcess, startProvider, startWorkerProcess } from '../../test/support/processes';
import { type FuzzRequest, type Who, fuzzBatch } from './arbitraries';
import { type Exchange, exchange } from './http';
import { type Finding, type ViolationKind, checkExchange } from './properties';
import { type ResolvedRequest, type RunState, describeBytes, resolve } from './wire';

/**
 * The fuzz run: the API (and optionally the worker) and the mock provider as
 * real processes on a database the caller prepared, two API clients A and B,
 * and fast-check drawing batches of requests from a seed. A batch is sent at
 * once, each request on its own connection; every answer is checked as it
 * comes (properties.ts), then the batch as a whole against the database:
 * the rows it added are exactly those of the answers that say a payment was
 * made, and every id an answer showed belongs to the client that asked.
 */

export interface FuzzOptions {
  /** Requests to send in all. */
  runs: number;
  seed: number;
  /** Requests per batch, sent at once; the same seed draws other batches with another size. */
  concurrency: number;
  /** The run stops drawing batches after this long, whatever `runs` says. */
  maxSeconds: number;
  databaseUrl: string;
  redisUrl: string;
  queuePrefix: string;
  worker: boolean;
  /** fast-check's replay path: only that batch of the seed is sent. */
  path?: string;
  /** Examples kept per kind of violation. */
  examples: number;
  progress?: (line: string) => void;
}

export interface ViolationExample {
  kind: ViolationKind;
  message: string;
  family: FuzzRequest['family'];
  /** Replays the batch that held it: `npm run fuzz -- <replay>`. */
  replay: string;
  request: string;
  answer: string;
  /** For a 5xx: what the API logged under the answer's request id. */
  api_log?: string[];
}

export interface FuzzSummary {
  ok: boolean;
  requests: number;
  by_status_class: Record<string, number>;
  by_status: Record<string, number>;
  by_family: Record<string, number>;
  server_errors: number;
  no_answers: number;
  envelope_violations: number;
  tenancy_violations: number;
  write_violations: number;
  contract_violations: number;
  payments_made: number;
  batches: number;
  interrupted: boolean;
  seconds: number;
  seed: number;
  concurrency: number;
  examples: ViolationExample[];
}

const REQUEST_TIMEOUT_MS = 15_000;
const PROGRESS_EVERY_MS = 10_000;
/** An address that fails authentication thousands of times is the fuzzer itself: the limits would turn the rest of the run into 429s. */
const UNLIMITED = '1000000000';
const COUNTS_SQL = `
  SELECT (SELECT count(*) FROM payments WHERE client_id = $1)::int AS payments_a,
         (SELECT count(*) FROM payments WHERE client_id = $2)::int AS payments_b,
         (SELECT count(*) FROM idempotency_keys WHERE client_id = $1)::int AS keys_a,
         (SELECT count(*) FROM idempotency_keys WHERE client_id = $2)::int AS keys_b,
         (SELECT count(*) FROM processed_messages WHERE client_id IN ($1, $2))::int AS events`;

interface Counts {
  payments_a: number;
  payments_b: number;
  keys_a: number;
  keys_b: number;
  events: number;
}

interface Sent {
  request: FuzzRequest;
  resolved: ResolvedRequest;
  exchange: Exchange;
}

const VIOLATION_FIELDS: Record<ViolationKind, keyof FuzzSummary> = {
  server_error: 'server_errors',
  no_answer: 'no_answers',
  envelope: 'envelope_violations',
  tenancy: 'tenancy_violations',
  write: 'write_violations',
  contract: 'contract_violations',
};

function answerText(sent: Exchange): string {
  if (sent.kind === 'no-answer') return `no answer (${sent.why}) after ${sent.ms} ms; received ${JSON.stringify(sent.received.slice(0, 300))}`;
  const { status, headers, body } = sent.answer;
  const shown = ['content-type', 'allow', 'x-request-id'].flatMap((name) => (headers[name] ? [`${name}: ${headers[name].join(', ')}`] : []));
  return `${status} ${shown.join('; ')} ${JSON.stringify(body.length > 500 ? `${body.slice(0, 500)}…` : body)}`;
}

function idempotencyKeyOf(request: FuzzRequest): string | undefined {
  const values = request.headers.filter(([name]) => name.toLowerCase() === 'idempotency-key').map(([, value]) => value.replace(/^[ \t]+|[ \t]+$/g, ''));
  try {
    return values.length === 0 ? undefined : parseIdempotencyKey(values);
  } catch {
    return undefined;
  }
}

/** The ids of the payment an answer says was made (201, 202) or declined (402, with the failed payment). */
function madePaymentId(sent: Sent): string | undefined {
  if (sent.exchange.kind !== 'answer' || sent.request.method !== 'POST') return undefined;
  const { status, body } = sent.exchange.answer;
  if (status !== 201 && status !== 202 && status !== 402) return undefined;
  try {
    const parsed = JSON.parse(body) as { object?: string; id?: unknown; error?: { payment?: { id?: unknown } } };
    const id = status === 402 ? parsed.error?.payment?.id : parsed.object === 'payment' ? parsed.id : undefined;
    return typeof id === 'string' ? id : undefined;
  } catch {
    return undefined;
  }
}

function orderIdOf(request: FuzzRequest): string | undefined {
  if (request.body?.kind !== 'text' || request.body.encoding !== 'utf8') return undefined;
  try {
    const orderId = (JSON.parse(request.body.text) as { order_id?: unknown } | null)?.order_id;
    return typeof orderId === 'string' ? orderId : undefined;
  } catch {
    return undefined;
  }
}

function errorCodeOf(sent: Exchange): string | undefined {
  if (sent.kind !== 'answer') return undefined;
  try {
    return (JSON.parse(sent.answer.body) as { error?: { code?: string } }).error?.code;
  } catch {
    return undefined;
  }
}

export async function runFuzz(options: FuzzOptions): Promise<FuzzSummary> {
  const started = performance.now();
  const progress = options.progress ?? (() => undefined);
  const dataSource: DataSource = await createDataSource({ databaseUrl: options.databaseUrl }).initialize();
  let provider: ProviderProcess | undefined;
  let api: ApiProcess | undefined;
  let worker: WorkerProcess | undefined;
  try {
    const clients = new ClientsService(new ClientsRepository(dataSource));
    const [a, b] = [await clients.create('fuzz client A'), await clients.create('fuzz client B')];
    const clientIds: Record<Who, string> = { A: a.id, B: b.id };
    const webhookSecret = `whsec_${randomBytes(32).toString('base64')}`;
    const env = {
      NODE_ENV: 'production',
      // Production refuses the development secrets key, and the worker
      // cannot start without one: the caller's, or one of the run's own.
      SECRETS_KEY: process.env.SECRETS_KEY ?? SecretBox.newKey(),
      LOG_LEVEL: 'error',
      CRASH_POINT: '',
      DATABASE_URL: options.databaseUrl,
      REDIS_URL: options.redisUrl,
      QUEUE_PREFIX: options.queuePrefix,
      PROVIDER_WEBHOOK_SECRET: webhookSecret,
      RATE_LIMIT_REQUESTS: UNLIMITED,
      AUTH_FAILURE_LIMIT: UNLIMITED,
    };
    provider = await startProvider({ ...env, LOG_LEVEL: 'warn' });
    api = await startApiProcess({ ...env, PROVIDER_URL: provider.url });
    if (options.worker) worker = await startWorkerProcess({ ...env, PROVIDER_URL: provider.url });
    const runningApi = api;
    // A crash is the worst answer of all: recorded once with the API's last words, and the run stops sending.
    let apiExit: string | undefined;
    void api.exited.then((exit) => (apiExit = `the API process exited (${JSON.stringify(exit)}); its last lines:\n${runningApi.output().slice(-20).join('\n')}`));

    const state: RunState = {
      baseUrl: api.url,
      apiKeys: { A: a.api_key, B: b.api_key },
      webhookSecret,
      ids: { payments: { A: [], B: [] }, events: { A: [], B: [] } },
    };
    const whoIs = (clientId: string): Who | undefined => (clientId === clientIds.A ? 'A' : clientId === clientIds.B ? 'B' : undefined);
    const owners = new Map<string, Who>();
    const keys: Record<Who, Set<string>> = { A: new Set(), B: new Set() };
    const summary: FuzzSummary = {
      ok: false,
      requests: 0,
      by_status_class: {},
      by_status: {},
      by_family: {},
      server_errors: 0,
      no_answers: 0,
      envelope_violations: 0,
      tenancy_violations: 0,
      write_violations: 0,
      contract_violations: 0,
      payments_made: 0,
      batches: 0,
      interrupted: false,
      seconds: 0,
      seed: options.seed,
      concurrency: options.concurrency,
      examples: [],
    };
    const bump = (counts: Record<string, number>, key: string) => (counts[key] = (counts[key] ?? 0) + 1);
    const shownPerKind = new Map<ViolationKind, number>();
    const record = (finding: Finding, sent: Sent | undefined, batchIndex: number) => {
      (summary[VIOLATION_FIELDS[finding.kind]] as number)++;
      const shown = shownPerKind.get(finding.kind) ?? 0;
      if (shown >= options.examples) return;
      shownPerKind.set(finding.kind, shown + 1);
      const requestId = sent?.exchange.kind === 'answer' ? sent.exchange.answer.headers['x-request-id']?.[0] : undefined;
      summary.examples.push({
        kind: finding.kind,
        message: finding.message,
        family: sent?.request.family ?? 'create',
        replay: `--seed ${options.seed} --concurrency ${options.concurrency} --path ${batchIndex}`,
        request: sent ? describeBytes(sent.resolved.bytes, state.apiKeys) : '(the batch as a whole)',
        answer: sent ? answerText(sent.exchange) : '',
        ...(finding.kind === 'server_error' && requestId && { api_log: runningApi.output().filter((line) => line.includes(requestId)) }),
      });
      progress(`violation (${finding.kind}): ${finding.message}; replay with ${`--seed ${options.seed} --concurrency ${options.concurrency} --path ${batchIndex}`}`);
    };

    const counts = async (): Promise<Counts> => ((await dataSource.query(COUNTS_SQL, [clientIds.A, clientIds.B])) as Counts[])[0];
    let expected = await counts();

    /** The database's side of a batch: rows written, and owners of ids and orders the answers named. */
    const judgeBatch = async (batch: Sent[], unknownIds: Map<string, Sent[]>, batchIndex: number, madeThisBatch: Record<Who, number>, newKeys: Record<Who, number>) => {
      const now = await counts();
      const accepted = batch.filter((sent) => sent.request.family === 'event' && sent.exchange.kind === 'answer' && sent.exchange.answer.status === 200).length;
      const wanted = {
        payments_a: expected.payments_a + madeThisBatch.A,
        payments_b: expected.payments_b + madeThisBatch.B,
        keys_a: expected.keys_a + newKeys.A,
        keys_b: expected.keys_b + newKeys.B,
      };
      for (const field of ['payments_a', 'payments_b', 'keys_a', 'keys_b'] as const) {
        if (now[field] !== wanted[field]) {
          const table = field.startsWith('payments') ? 'payments' : 'idempotency_keys';
          const client = field.endsWith('_a') ? 'A' : 'B';
          record({ kind: 'write', message: `${table} of client ${client}: ${now[field]} rows where the answers account for ${wanted[field]}` }, undefined, batchIndex);
        }
      }
      // A verified event for a payment of ours is recorded once however it ends (applied, duplicate, stale); one for no payment, or a refused one, never.
      if (now.events - expected.events > accepted) {
        record({ kind: 'write', message: `processed_messages grew by ${now.events - expected.events} with ${accepted} events accepted` }, undefined, batchIndex);
      }
      expected = now;

      // Events are made by the server as payments settle: the run learns their owners from the table, never from an answer.
      const events = (await dataSource.query(
        'SELECT id, client_id FROM events WHERE client_id = ANY($1) ORDER BY created_at DESC LIMIT 100',
        [[clientIds.A, clientIds.B]],
      )) as { id: string; client_id: string }[];
      for (const row of events.reverse()) {
        const owner = whoIs(row.client_id);
        if (owner === undefined || owners.has(row.id)) continue;
        owners.set(row.id, owner);
        state.ids.events[owner].push(row.id);
      }

      if (unknownIds.size > 0) {
        const wanted = [...unknownIds.keys()];
        const rows = (await dataSource.query(
          'SELECT id, client_id FROM payments WHERE id = ANY($1) UNION ALL SELECT id, client_id FROM events WHERE id = ANY($1)',
          [wanted],
        )) as { id: string; client_id: string }[];
        for (const row of rows) {
          const owner = whoIs(row.client_id);
          for (const sent of unknownIds.get(row.id) ?? []) {
            if (owner === undefined || !sent.resolved.credentials.has(owner)) {
              record({ kind: 'tenancy', message: `the answer shows ${row.id}, a payment of ${owner ? `client ${owner}` : 'a client of no one here'}` }, sent, batchIndex);
            }
          }
        }
      }
      for (const sent of batch) {
        const orderId = orderIdOf(sent.request);
        if (errorCodeOf(sent.exchange) !== 'order_already_paid' || orderId === undefined || sent.resolved.credentials.size !== 1) continue;
        const [who] = sent.resolved.credentials;
        const own = (await dataSource.query('SELECT 1 FROM payments WHERE client_id = $1 AND order_id = $2 LIMIT 1', [clientIds[who], orderId])) as unknown[];
        if (own.length === 0) record({ kind: 'tenancy', message: `order ${orderId} refused as paid to client ${who}, which has no payment for it` }, sent, batchIndex);
      }
    };

    const sendBatch = async (batch: FuzzRequest[], batchIndex: number): Promise<void> => {
      const sentBatch = await Promise.all(
        batch.map(async (request): Promise<Sent> => {
          const resolved = resolve(state, request);
          return { request, resolved, exchange: await exchange(state.baseUrl, { bytes: resolved.bytes, head: request.method === 'HEAD' }, REQUEST_TIMEOUT_MS) };
        }),
      );
      const unknownIds = new Map<string, Sent[]>();
      const made: Record<Who, number> = { A: 0, B: 0 };
      const newKeys: Record<Who, number> = { A: 0, B: 0 };
      // Ids first: a list in this batch may show a payment another request of the batch made.
      for (const sent of sentBatch) {
        const id = madePaymentId(sent);
        if (id === undefined || sent.resolved.credentials.size !== 1) continue;
        const [who] = sent.resolved.credentials;
        if (!owners.has(id)) {
          owners.set(id, who);
          state.ids.payments[who].push(id);
          made[who]++;
          summary.payments_made++;
        }
        const key = idempotencyKeyOf(sent.request);
        if (key !== undefined && !keys[who].has(key)) {
          keys[who].add(key);
          newKeys[who]++;
        }
      }
      for (const sent of sentBatch) {
        summary.requests++;
        bump(summary.by_family, sent.request.family);
        const status = sent.exchange.kind === 'answer' ? sent.exchange.answer.status : undefined;
        bump(summary.by_status_class, status === undefined ? 'none' : `${Math.floor(status / 100)}xx`);
        bump(summary.by_status, String(status ?? 'none'));
        const { findings, unknownIds: unknown } = checkExchange(sent.request.method, sent.resolved, sent.exchange, (id) => owners.get(id));
        for (const finding of findings) record(finding, sent, batchIndex);
        for (const id of unknown) unknownIds.set(id, [...(unknownIds.get(id) ?? []), sent]);
      }
      await judgeBatch(sentBatch, unknownIds, batchIndex, made, newKeys);
      if (apiExit !== undefined) record({ kind: 'server_error', message: apiExit }, undefined, batchIndex);
    };

    const firstIndex = options.path === undefined ? 0 : Number(options.path.split(':')[0]);
    let batchIndex = firstIndex;
    const report = setInterval(() => {
      const violations = Object.values(VIOLATION_FIELDS).reduce((sum, field) => sum + (summary[field] as number), 0);
      progress(`${summary.requests} requests, ${violations} violations, ${Math.round((performance.now() - started) / 1000)} s`);
    }, PROGRESS_EVERY_MS).unref();
    const deadline = Date.now() + options.maxSeconds * 1_000;
    try {
      await fc.assert(
        fc.asyncProperty(fuzzBatch(options.concurrency), async (batch) => {
          const index = batchIndex++;
          if (apiExit !== undefined) return;
          const left = options.path === undefined ? options.runs - summary.requests : batch.length;
          await sendBatch(batch.slice(0, Math.max(0, left)), index);
          summary.batches++;
        }),
        {
          seed: options.seed,
          numRuns: options.path === undefined ? Math.ceil(options.runs / options.concurrency) : 1,
          ...(options.path !== undefined && { path: options.path }),
          interruptAfterTimeLimit: Math.max(1, deadline - Date.now()),
          // Every violation is recorded and the run goes on; shrinking would replay against a database the run has changed.
          endOnFailure: true,
        },
      );
    } finally {
      clearInterval(report);
    }
    summary.interrupted = options.path === undefined && summary.requests < options.runs && apiExit === undefined;
    summary.seconds = Math.round((performance.now() - started) / 100) / 10;
    summary.ok = Object.values(VIOLATION_FIELDS).every((field) => summary[field] === 0);
    return summary;
  } finally {
    await Promise.all([api?.stop(), worker?.stop()]);
    await provider?.stop();
    // Leftover keys under a prefix of the run's own harm no one; a Redis hiccup here must not hide the summary.
    await dropWorkerQueues(options.redisUrl, options.queuePrefix).catch(() => undefined);
    await dataSource.destroy();
  }
}
