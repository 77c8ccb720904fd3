import { randomUUID } from 'node:crypto';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import type { DataSource } from 'typeorm';
import { runAudit } from '../scripts/audit';
import { DeclineError, type GiveUpInfo, type Payment, PaymentsClient } from '../client/src/index.js';
import { type HttpReply, type Reply, ReplyRecorder } from './support/reply-recorder';
import { type PrivateRedis, startPrivateRedis } from './support/private-redis';
import type { AppConfig } from '../src/config/app-config';
import { ensureDatabase } from '../src/database/ensure-database';
import { createDataSource } from '../src/database/data-source';
import { migrate } from '../src/database/migrate';
import { RECONCILIATION_QUEUE } from '../src/reconciliation/reconciliation.constants';
import { type PrivatePostgres, startPrivatePostgres } from './support/private-postgres';
import { eventually } from './support/eventually';
import { type InProcessStack, startInProcessStack } from './support/in-process-app';

/**
 * Redis and Postgres failing under a running API and worker. Each fault is
 * done to a private server (a redis-server or a Postgres cluster of this
 * file's own), never to the machine's, which other people and CI use.
 */

jest.setTimeout(90_000);

/** Knobs short enough that every payment here ends within seconds. */
const FAST = {
  PROVIDER_TIMEOUT_MS: '300',
  PROVIDER_DEADLINE_MS: '1500',
  PROVIDER_BACKOFF_BASE_MS: '20',
  PROVIDER_BACKOFF_CAP_MS: '100',
  IDEMPOTENCY_LEASE_MS: '2500',
  RECONCILE_INTERVAL_MS: '100',
  RECONCILE_STALE_AFTER_MS: '200',
  RECONCILE_BACKOFF_BASE_MS: '100',
  RECONCILE_BACKOFF_CAP_MS: '500',
  RECONCILE_MAX_ATTEMPTS: '30',
};

/**
 * The clients here (the client library) retry until their deadline: these
 * tests are about what the API answers through an outage, so the retry
 * budget, which would make a client give up sooner, is off.
 */
const CLIENT_SETTINGS = {
  timeoutMs: 5_000,
  maxRetries: 60,
  deadlineMs: 45_000,
  backoff: { baseMs: 50, capMs: 500 },
  retryBudget: false,
} as const;

/** API and worker on the same knobs, as a deployment runs them. */
async function startStack(overrides: Record<string, string>): Promise<InProcessStack> {
  const knobs = { ...FAST, ...overrides };
  const stack = await startInProcessStack({
    providerEnv: { PROVIDER_SLOW_REPLY_MS: '800', PROVIDER_PENDING_SETTLE_MS: '1500' },
    config: knobs,
    client: 'infrastructure faults',
  });
  await stack.startWorker(knobs).catch(async (error: unknown) => {
    await stack.stop();
    throw error;
  });
  return stack;
}

/**
 * One request, no retry and no poll, which no client does: a payment left
 * pending for the worker alone to settle, whatever happens to Redis meanwhile.
 */
async function postOnceTo(stack: InProcessStack, body: Record<string, unknown>): Promise<number> {
  const response = await fetch(`${stack.url}/v1/payments`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${stack.apiKey}`, 'Idempotency-Key': randomUUID(), 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(5_000),
  });
  await response.body?.cancel();
  return response.status;
}

/** The payment, succeeded or (from a DeclineError) failed. */
function pay(stack: InProcessStack, paymentMethod: string): Promise<Payment> {
  const client = new PaymentsClient({ baseUrl: stack.url, apiKey: stack.apiKey, ...CLIENT_SETTINGS });
  return client.payments.create({ amount: 1_000, currency: 'EUR', payment_method: paymentMethod }).catch((error: unknown) => {
    if (error instanceof DeclineError) return error.payment;
    throw error;
  });
}

async function statusesOf(dataSource: DataSource): Promise<Record<string, number>> {
  const rows = (await dataSource.query(`SELECT status, count(*)::int AS n FROM payments GROUP BY status`)) as {
    status: string;
    n: number;
  }[];
  return Object.fromEntries(rows.map((row) => [row.status, row.n]));
}

async function allTerminal(dataSource: DataSource): Promise<true | undefined> {
  const [{ n }] = (await dataSource.query(`SELECT count(*)::int AS n FROM payments WHERE status = 'pending'`)) as {
    n: number;
  }[];
  return n === 0 ? true : undefined;
}

async function ready(url: string): Promise<{ status: number; body: { error?: { code?: string; message?: string } } }> {
  const response = await fetch(`${url}/health/ready`, { signal: AbortSignal.timeout(5_000) });
  return { status: response.status, body: (await response.json()) as { error?: { code?: string; message?: string } } };
}

async function sweepSchedulerExists(config: AppConfig): Promise<boolean> {
  const queue = new Queue(RECONCILIATION_QUEUE, { connection: { url: config.redisUrl }, prefix: config.queuePrefix });
  try {
    return (await queue.getJobScheduler('reconcile-sweep')) !== undefined;
  } finally {
    await queue.close();
  }
}

describe('Redis faults (a private redis-server)', () => {
  let redis: PrivateRedis;
  let stack: InProcessStack | undefined;

  beforeAll(async () => {
    redis = await startPrivateRedis();
  });

  // Redis first: stopping the stack drops its queue's keys.
  afterEach(async () => {
    if (!redis.running) await redis.start();
    await stack?.stop();
    stack = undefined;
    await redis.flushAll();
  });

  afterAll(async () => {
    await redis?.kill();
  });

  it('FLUSHALL with pending payments: the next sweep finds them all and they end terminal', async () => {
    stack = await startStack({ REDIS_URL: redis.url });
    const created = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        postOnceTo(stack!, { amount: 100 + i, currency: 'USD', payment_method: 'pm_card_pending' }),
      ),
    );
    expect(created).toEqual(Array(12).fill(202));
    // BullMQ's keys (the job schedulers, and the jobs of the moment) exist: the flush destroys them.
    const counter = new Redis(redis.url);
    try {
      await eventually(async () => ((await counter.dbsize()) > 0 ? true : undefined), { what: 'BullMQ keys' });
      await redis.flushAll();
      expect(await counter.dbsize()).toBe(0);
    } finally {
      counter.disconnect();
    }

    await eventually(() => allTerminal(stack!.dataSource), { timeoutMs: 20_000, what: 'every payment terminal' });
    expect(await statusesOf(stack.dataSource)).toEqual({ succeeded: 12 });
    expect(await sweepSchedulerExists(stack.config)).toBe(true);
    expect(await runAudit(stack.config)).toMatchObject({ ok: true, charges: { total: 12, succeeded: 12 } });
  });

  it('Redis stopped: payments are still made, readiness says 503, the worker catches up when Redis is back', async () => {
    stack = await startStack({ REDIS_URL: redis.url });
    expect((await ready(stack.url)).status).toBe(200);

    await redis.kill();
    const notReady = await ready(stack.url);
    expect(notReady.status).toBe(503);
    expect(notReady.body.error).toMatchObject({ code: 'service_unavailable', message: expect.stringContaining('redis') });

    expect(await pay(stack, 'pm_card_ok')).toMatchObject({ status: 'succeeded' });
    expect(await pay(stack, 'pm_card_declined')).toMatchObject({ status: 'failed', failure_code: 'card_declined' });
    // Charges the provider holds as pending wait for the worker, which cannot run without Redis.
    const unsettled = await Promise.all(
      [300, 301, 302].map((amount) => postOnceTo(stack!, { amount, currency: 'USD', payment_method: 'pm_card_pending' })),
    );
    expect(unsettled).toEqual([202, 202, 202]);
    expect(await statusesOf(stack.dataSource)).toEqual({ succeeded: 1, failed: 1, pending: 3 });

    await redis.start();
    await eventually(async () => ((await ready(stack!.url)).status === 200 ? true : undefined), {
      what: 'readiness back',
    });
    await eventually(() => allTerminal(stack!.dataSource), { timeoutMs: 20_000, what: 'the worker to catch up' });
    expect(await statusesOf(stack.dataSource)).toEqual({ succeeded: 4, failed: 1 });
    expect(await runAudit(stack.config)).toMatchObject({ ok: true, charges: { total: 5 } });
  });
});

describe('Postgres restarted under load (a private Postgres cluster)', () => {
  const CLIENTS = 8;
  const PAYMENTS_PER_CLIENT = 12;
  const METHODS = ['pm_card_ok', 'pm_card_ok', 'pm_card_declined', 'pm_card_timeout', 'pm_card_flaky'];

  let postgres: PrivatePostgres;
  let stack: InProcessStack | undefined;

  beforeAll(async () => {
    postgres = await startPrivatePostgres();
    const databaseUrl = postgres.urlFor('payments_test');
    await ensureDatabase(databaseUrl);
    const dataSource = await createDataSource({ databaseUrl }).initialize();
    try {
      await migrate(dataSource);
    } finally {
      await dataSource.destroy();
    }
  });

  afterAll(async () => {
    await stack?.stop();
    await postgres?.destroy();
  });

  it('answers 503 service_unavailable while it is down, recovers alone, and loses or doubles nothing', async () => {
    stack = await startStack({ DATABASE_URL: postgres.urlFor('payments_test') });
    const s = stack;
    const recorder = new ReplyRecorder();
    const giveUps: GiveUpInfo[] = [];
    /** Every payment's replies so far, as they come. */
    const sent: Reply[][] = [];
    let finished = 0;
    const load = Promise.all(
      Array.from({ length: CLIENTS }, async (_, client) => {
        const api = new PaymentsClient({ baseUrl: s.url, apiKey: s.apiKey, ...CLIENT_SETTINGS, fetch: recorder.fetch, onGiveUp: (info) => giveUps.push(info) });
        const results: { key: string; replies: Reply[]; payment?: Payment }[] = [];
        for (let n = 0; n < PAYMENTS_PER_CLIENT; n++) {
          const body = { amount: 100 + n, currency: 'USD' as const, payment_method: METHODS[(client + n) % METHODS.length] };
          const key = randomUUID();
          const replies = recorder.watch(key);
          sent.push(replies);
          const payment = await api.payments.create(body, { idempotencyKey: key }).catch((error: unknown) => {
            if (error instanceof DeclineError) return error.payment;
            return undefined;
          });
          recorder.unwatch(key);
          results.push({ key, replies, payment });
          finished++;
        }
        return results;
      }),
    );

    // Restart mid-load, and hold it down until the API has been seen answering the outage: its
    // readiness, and a payment request of the load (clients spend stretches in a provider's
    // timeout or a backoff, and an outage over before any of them asks would show nothing).
    await eventually(async () => (finished >= CLIENTS ? true : undefined), { timeoutMs: 30_000, what: 'load under way' });
    await postgres.stop();
    const duringOutage = await eventually(
      async () => {
        const probe = await ready(s.url);
        return probe.status === 503 ? probe : undefined;
      },
      { what: 'readiness to notice' },
    );
    expect(duringOutage.body.error?.message).toContain('postgres');
    await eventually(() => (sent.flat().some((reply) => reply.kind === 'http' && reply.status === 503) ? true : undefined), {
      timeoutMs: 15_000,
      what: 'a payment request answered 503 during the outage',
    });
    await postgres.start();

    const results = (await load).flat();
    const replies = results.flatMap((result) => result.replies);
    const http = replies.filter((reply): reply is HttpReply => reply.kind === 'http');
    const unavailable = http.filter((reply) => reply.status === 503);
    expect(http.filter((reply) => reply.status === 500)).toEqual([]);
    expect(unavailable.length).toBeGreaterThan(0);
    expect(new Set(unavailable.map((reply) => reply.code))).toEqual(new Set(['service_unavailable']));
    // No client gave up: every payment ended succeeded or declined.
    expect(giveUps.map(({ idempotencyKey, reason }) => ({ idempotencyKey, reason }))).toEqual([]);
    expect(new Set(results.map((result) => result.payment?.status))).toEqual(new Set(['succeeded', 'failed']));

    // One payment per key, and every answer for a key named that payment.
    const [{ n: payments }] = (await s.dataSource.query(`SELECT count(*)::int AS n FROM payments`)) as { n: number }[];
    expect(payments).toBe(CLIENTS * PAYMENTS_PER_CLIENT);
    const paymentsNamed = (result: { replies: Reply[] }) =>
      new Set(result.replies.flatMap((reply) => (reply.kind === 'http' && reply.paymentId ? [reply.paymentId] : [])));
    expect(results.filter((result) => paymentsNamed(result).size !== 1).map((result) => result.key)).toEqual([]);
    await eventually(() => allTerminal(s.dataSource), { timeoutMs: 20_000, what: 'every payment terminal' });
    expect(await runAudit(s.config)).toMatchObject({ ok: true, payments: { total: CLIENTS * PAYMENTS_PER_CLIENT } });
  });
});
