import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { runAudit } from '../../scripts/audit';
import { type PrivatePgBouncer, startPrivatePgBouncer } from '../support/private-pgbouncer';
import { type FailoverSteps, type ReplicatedPostgres, startReplicatedPostgres } from '../support/private-standby';
import { isHealthy } from '../support/processes';
import { loadConfig } from '../../src/config/app-config';
import { createDataSource } from '../../src/database/data-source';
import { eventually } from '../support/eventually';
import type { PaymentsClient, Reply } from '../support/process-stack';
import { TEST_DATABASE_URL, dropQueue, testConfig, uniqueQueuePrefix } from '../support/test-env';
import { ScaleStack, answer, payment } from './scale-stack';

/**
 * A standby takes over under load. The API and the worker reach a private
 * primary only through a private PgBouncer; the primary streams to a hot
 * standby with synchronous replication, so every commit it acknowledged is on
 * the standby's disk. Mid-stream the primary is stopped hard, the standby
 * promoted and the bouncer pointed at it, with no process restarted. Then
 * nothing the API acknowledged is missing from the new primary, every key
 * ends with one payment and one charge, and the audit is clean.
 */
jest.setTimeout(120_000);

const run = promisify(execFile);
const MIGRATE = join(__dirname, '..', '..', 'dist', 'src', 'database', 'migrate.js');
const DATABASE = new URL(TEST_DATABASE_URL).pathname.slice(1);

/** Clients sending payments one after another, each with a new key. */
const CONCURRENCY = 4;
/** The stream's bounds, whatever happens: it stops at whichever comes first. */
const MAX_PAYMENTS = 1_500;
const STREAM_DEADLINE_MS = 45_000;
/** Every request is answered within this, or counts as a hang. */
const ANSWER_BOUND_MS = 12_000;
/** A client pauses this long after a 503 before its next payment, as a client that backs off would. */
const PAUSE_AFTER_503_MS = 100;
/** Acknowledged payments before the switch, and 201s after it, before the stream ends. */
const BEFORE_SWITCH = 30;
const AFTER_SWITCH = 20;

const METHODS = ['pm_card_ok', 'pm_card_ok', 'pm_card_declined', 'pm_card_ok', 'pm_card_pending', 'pm_card_lost_response'];
/** What a first answer may be for each method; on a busy machine a provider call may outlast its deadline: 202. */
const FIRST_ANSWERS: Record<string, string[]> = {
  pm_card_ok: ['201', '202'],
  pm_card_declined: ['402 card_declined', '202'],
  pm_card_pending: ['202'],
  pm_card_lost_response: ['201', '202'],
};
const finalStatus = (method: string) => (method === 'pm_card_declined' ? 'failed' : 'succeeded');
const finalAnswer = (method: string) => (method === 'pm_card_declined' ? '402 card_declined' : '201');

/** One payment of the stream and what came back. */
interface Exchange {
  key: string;
  method: string;
  sentAt: number;
  answeredAt: number;
  /** Undefined: no answer within ANSWER_BOUND_MS (or no connection). */
  reply?: Reply;
}

/** The payment a 201 or 202 answers with, or a 402 carries in its error. */
const paymentOf = (reply: Reply | undefined): string | undefined => reply?.body.id ?? reply?.body.error?.payment?.id;
/** 201, 402 or 202 with the payment: the API took the payment and said so. */
const acknowledged = (reply: Reply | undefined): boolean => [201, 202, 402].includes(reply?.status ?? 0) && !!paymentOf(reply);

/** A steady stream of payments from CONCURRENCY clients, every exchange recorded, until stop() or its bounds. */
class PaymentStream {
  readonly exchanges: Exchange[] = [];
  private stopping = false;
  private readonly done: Promise<void[]>;

  constructor(private readonly client: PaymentsClient) {
    const deadline = Date.now() + STREAM_DEADLINE_MS;
    this.done = Promise.all(Array.from({ length: CONCURRENCY }, () => this.send(deadline)));
  }

  private async send(deadline: number): Promise<void> {
    while (!this.stopping && this.exchanges.length < MAX_PAYMENTS && Date.now() < deadline) {
      const method = METHODS[this.exchanges.length % METHODS.length];
      const exchange: Exchange = { key: randomUUID(), method, sentAt: Date.now(), answeredAt: 0 };
      this.exchanges.push(exchange);
      try {
        exchange.reply = await this.client.post(exchange.key, payment(method), AbortSignal.timeout(ANSWER_BOUND_MS));
      } catch {
        // No answer in time: recorded as such (reply undefined) and asserted on.
      }
      exchange.answeredAt = Date.now();
      if (exchange.reply?.status === 503) await new Promise((wake) => setTimeout(wake, PAUSE_AFTER_503_MS));
    }
  }

  async stop(): Promise<Exchange[]> {
    this.stopping = true;
    await this.done;
    return this.exchanges;
  }
}

/** Runs `work` on every item, `concurrency` at a time. */
async function eachConcurrently<T>(items: readonly T[], concurrency: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < items.length) await work(items[next++]);
    }),
  );
}

/** The unavailability window: from the first failed answer to the first success of a payment sent after it. */
function unavailability(exchanges: readonly Exchange[], steps: FailoverSteps) {
  const failures = exchanges.filter((exchange) => exchange.reply?.status === 503);
  const firstFailure = Math.min(...failures.map((exchange) => exchange.answeredAt));
  const recovered = Math.min(
    ...exchanges.filter((exchange) => acknowledged(exchange.reply) && exchange.sentAt >= firstFailure).map((exchange) => exchange.answeredAt),
  );
  const seconds = (ms: number) => Math.round(ms) / 1_000;
  return {
    window_s: failures.length === 0 ? 0 : seconds(recovered - firstFailure),
    answered_503: failures.length,
    promotion_s: seconds(steps.standbyPromotedAt - steps.primaryStoppedAt),
    retarget_s: seconds(steps.bouncerRetargetedAt - steps.standbyPromotedAt),
    slowest_answer_s: seconds(Math.max(...exchanges.map((exchange) => exchange.answeredAt - exchange.sentAt))),
  };
}

/** Every payment's status, read directly on the server of `databaseUrl`. */
async function paymentStatuses(databaseUrl: string): Promise<Map<string, string>> {
  const db = await createDataSource({ databaseUrl }).initialize();
  try {
    const rows = (await db.query('SELECT id, status FROM payments')) as { id: string; status: string }[];
    return new Map(rows.map((row) => [row.id, row.status]));
  } finally {
    await db.destroy();
  }
}

describe('a synchronous standby takes over from a primary stopped under load', () => {
  let pair: ReplicatedPostgres;
  let bouncer: PrivatePgBouncer;
  const stack = new ScaleStack();
  const queuePrefix = uniqueQueuePrefix();

  beforeAll(async () => {
    pair = await startReplicatedPostgres();
    bouncer = await startPrivatePgBouncer({ serverPort: pair.primary.port });
    // Migrations go direct (their advisory lock needs a session); what the
    // processes send goes through the bouncer, the only address they know
    // that survives the failover.
    const env = {
      DATABASE_URL: bouncer.urlFor(DATABASE),
      DATABASE_DIRECT_URL: pair.primary.urlFor(DATABASE),
      DATABASE_PREPARED_STATEMENTS: 'functions',
      QUEUE_PREFIX: queuePrefix,
      // A provider budget a busy machine can keep.
      IDEMPOTENCY_LEASE_MS: '4000',
      PROVIDER_TIMEOUT_MS: '1500',
      PROVIDER_DEADLINE_MS: '3000',
    };
    await run(process.execPath, [MIGRATE], { env: { ...process.env, ...env } });
    await stack.start({
      databaseUrl: env.DATABASE_URL,
      env,
      providerEnv: { PROVIDER_PENDING_SETTLE_MS: '1000' },
      apis: 1,
      workers: 1,
    });
  });
  afterAll(async () => {
    await stack.stop();
    await bouncer?.stop();
    await pair?.destroy();
    await dropQueue(testConfig({ QUEUE_PREFIX: queuePrefix }));
  });

  it('answers 503 or succeeds during the switch, recovers without a restart, and loses no acknowledged payment', async () => {
    const [api] = stack.apis;
    const stream = new PaymentStream(stack.clients[0]);
    await eventually(() => (stream.exchanges.filter((exchange) => acknowledged(exchange.reply)).length >= BEFORE_SWITCH ? true : undefined), {
      timeoutMs: 30_000,
      what: `${BEFORE_SWITCH} acknowledged payments before the switch`,
    });
    const steps = await pair.failOver(bouncer);
    await eventually(async () => ((await isHealthy(`${api.url}/health/ready`)) ? true : undefined), {
      timeoutMs: 20_000,
      what: 'the API to be ready again',
    });
    const createdAfter = () => stream.exchanges.filter((e) => e.sentAt > steps.bouncerRetargetedAt && e.reply?.status === 201);
    await eventually(() => (createdAfter().length >= AFTER_SWITCH ? true : undefined), {
      timeoutMs: 20_000,
      what: `${AFTER_SWITCH} payments created after the switch`,
    });
    const exchanges = await stream.stop();
    const figures = unavailability(exchanges, steps);

    // Every request answered within the bound, each answer a success or a 503 in the envelope.
    expect(exchanges.filter((exchange) => !exchange.reply).map(({ key, sentAt }) => ({ key, sentAt }))).toEqual([]);
    const unexpected = exchanges.filter(({ method, reply }) => {
      if (reply!.status === 503) return answer(reply!) !== '503 service_unavailable' || reply!.headers.get('retry-after') === null;
      return !FIRST_ANSWERS[method].includes(answer(reply!));
    });
    expect(unexpected.map(({ method, reply }) => ({ method, answer: answer(reply!), body: reply!.text }))).toEqual([]);
    expect(exchanges.filter((exchange) => acknowledged(exchange.reply) && exchange.answeredAt < steps.primaryStoppedAt).length).toBeGreaterThanOrEqual(
      BEFORE_SWITCH,
    );

    // Every acknowledged payment is on the new primary, read there directly, with its final status.
    await stack.settled(30_000);
    const statuses = await paymentStatuses(pair.standby.urlFor(DATABASE));
    const lost = exchanges
      .filter((exchange) => acknowledged(exchange.reply))
      .map(({ method, reply }) => ({ id: paymentOf(reply)!, answered: answer(reply!), method }))
      .filter(({ id, method }) => statuses.get(id) !== finalStatus(method))
      .map((payment) => ({ ...payment, now: statuses.get(payment.id) ?? 'missing' }));
    console.log(
      JSON.stringify({
        payments: exchanges.length,
        acknowledged: exchanges.filter((exchange) => acknowledged(exchange.reply)).length,
        ...figures,
        payments_lost: lost.length,
      }),
    );
    expect(lost).toEqual([]);
    // Those answered 202, and those the switch left pending, were settled by the worker.
    const reconciled = stack.workers[0].output().filter((line) => line.includes('"payment reconciled"'));
    expect(reconciled.length).toBeGreaterThanOrEqual(exchanges.filter((exchange) => exchange.reply?.status === 202).length);

    // Every key retried: a final answer, replayed byte for byte, or (a key the switch cut off) finished now.
    const retries = new Map<string, Reply>();
    await eachConcurrently(exchanges, 8, async ({ key, method }) => {
      retries.set(key, await stack.clients[0].post(key, payment(method)));
    });
    for (const { key, method, reply } of exchanges) {
      const retry = retries.get(key)!;
      if (acknowledged(reply)) {
        expect({ answer: answer(retry), replayed: retry.headers.get('idempotent-replayed'), id: paymentOf(retry) }).toEqual({
          answer: finalAnswer(method),
          replayed: 'true',
          id: paymentOf(reply),
        });
        if (reply!.status !== 202) expect(retry.text).toBe(reply!.text);
      } else {
        expect([finalAnswer(method), '202']).toContain(answer(retry));
      }
    }
    await stack.settled(30_000);
    const ledger = await stack.ledger();
    expect(ledger).toHaveLength(exchanges.length);
    expect(ledger.filter((row) => row.charges !== 1)).toEqual([]);

    await stack.eventsDelivered(30_000);
    const audit = await runAudit(loadConfig({ ...process.env, ...stack.env, REDIS_URL: testConfig().redisUrl }));
    expect(audit).toMatchObject({ ok: true });

    // The old primary comes back, as a crashed server does: the bouncer no longer leads there.
    await pair.primary.start();
    const [{ port }] = (await stack.db.query(`SELECT current_setting('port') AS port`)) as { port: string }[];
    expect(Number(port)).toBe(pair.standby.port);
    const servers = (await bouncer.admin('SHOW SERVERS')).map((server) => Number(server.port));
    expect(servers.filter((serverPort) => serverPort !== pair.standby.port)).toEqual([]);
  });
});
