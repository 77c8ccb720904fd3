import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import type { DataSource } from 'typeorm';
import { SecretBox } from '../src/common/secret-box';
import { onboardClient } from '../src/merchant-events/client-onboarding';
import { loadConfig, loadConfigOrExit, secretsConfig } from '../src/config/app-config';
import type { OperationStatus } from '../src/ledger/operation';
import type { PaymentStatus } from '../src/ledger/payments.table';
import { runAudit } from './audit';
import { loadClientLibrary } from './lib/client-library';
import { Fleet, runFaults } from './chaos/fleet';
import { REPEATED_ERROR_LINES, errorLines, outputFolder } from './chaos/process-output';
import { type ChaosClient, planOperations, runLoad } from './chaos/load';
import {
  type FinalPayment,
  type FinalRefund,
  type KeyRow,
  type MerchantEventsInput,
  type OwnedPayment,
  type RefundKeyRow,
  judge,
  missingEvents,
} from './chaos/verdict';
import { type PrivatePgBouncer, QUERY_WAIT_TIMEOUT_S, startPrivatePgBouncer } from '../test/support/private-pgbouncer';
import { type PrivatePostgres, startPrivatePostgres } from '../test/support/private-postgres';
import { type PrivateRedis, freePort, startPrivateRedis } from '../test/support/private-redis';
import { databaseUrlNamed, openScratchDatabase } from '../test/support/scratch-database';
import { type Random, mulberry32 } from '../test/support/random';
import { startProvider } from '../test/support/processes';
import { type Behaviour, WebhookReceiver } from '../test/support/webhook-receiver';
import type { EventType } from '../src/ledger/outbox';

/**
 * `npm run chaos -- --payments N --seconds S`: two APIs, two workers and the
 * mock provider (with failures, lost and late replies, with --poison-rate 2xx
 * answers whose body the API cannot use, and charge and refund events
 * delivered to the first API with duplicates and random delays) under a load
 * of retrying clients, who refund a good share of the payments that succeed
 * (partly, in turns, or several at once under different keys, some on cards
 * whose refunds fail, lose their reply, answer late or stay pending), while
 * APIs and workers are SIGKILLed and restarted,
 * Redis is flushed once and, with --postgres-restarts, Postgres is stopped
 * and started again. Every merchant has a webhook endpoint on a loopback
 * receiver that verifies signatures and fails or holds a share of first
 * attempts. Then the faults stop, every payment and refund must become terminal within
 * the drain deadline and every event reach its endpoint within the events
 * deadline, the ledger audit runs, and one JSON line says what happened.
 * Exit 0: no violation; 1: a violation; 2: the run could not be made.
 *
 * Everything is on loopback, in a database of its own (payments_chaos unless
 * --database says otherwise: its tables are truncated) and a redis-server of
 * its own, so a run never touches what tests or other people use. The
 * database is on the server of DATABASE_URL, or, when Postgres is to be
 * restarted, on a private Postgres cluster the run starts and deletes (the
 * machine's server is never stopped). Every loop is bounded: S seconds of
 * load and faults, each client's own deadline, then the drain and events deadlines.
 */

const USAGE = `Usage: npm run chaos -- [options]

  --payments N               payment operations (default 300); about 40 % of those that succeed are then refunded
  --seconds S                they start evenly over S seconds, faults meanwhile (default 30)
  --concurrency N            operations in flight at most (default 64)
  --clients N                merchants, each with its API key (default 8)
  --seed N                   the workload and fault draws (default: random, printed)
  --database NAME            the run's database, truncated first; must contain "chaos" (default payments_chaos)
  --drain-seconds S          after the load, how long payments and refunds may take to become terminal (default 120)
  --events-seconds S         after the drain, how long events may take to get a 2xx at their endpoints (default 60)
  --failure-rate R           share of provider calls the mock provider answers 503 without acting (default 0.3)
  --poison-rate R            share of the provider's 2xx charge and refund answers whose body is replaced, the charge
                             or refund recorded as usual, by one the API cannot use (U+0000, a lone surrogate, an over-long failure_code,
                             a wrong type, a missing field, not JSON, cut short): PROVIDER_POISON_RATE (default 0)
  --postgres-restarts N      stop and start Postgres N times during the load, fast and immediate shutdowns in turn;
                             the database then lives on a private cluster (Debian's server binaries) (default 0)
  --postgres-down-seconds S  how long Postgres stays down each time (default 3)
  --pgbouncer                the APIs, workers and audit reach Postgres through a private PgBouncer in
                             transaction pooling mode (pgbouncer installed), migrations directly
  --examples N               examples kept per kind of violation (default 5)
  --output-dir DIR           where every API's, worker's and the provider's output is written, one file per process
                             (default: a new folder in the system's temporary folder, named on stderr); when the run
                             finds a violation, the error lines there are repeated on stderr
  --help                     this text

Prints one JSON line; exit 0: no violation, 1: a violation, 2: the run could not be made.
`;

interface ChaosOptions {
  payments: number;
  seconds: number;
  concurrency: number;
  clients: number;
  seed: number;
  database: string;
  drainSeconds: number;
  eventsSeconds: number;
  failureRate: string;
  poisonRate: string;
  postgresRestarts: number;
  postgresDownSeconds: number;
  pgbouncer: boolean;
  examples: number;
  outputDir: string | undefined;
}

/** Short enough that every payment is terminal, and every event delivered, seconds after the faults end. */
const SERVICE_KNOBS = {
  NODE_ENV: 'production',
  LOG_LEVEL: 'warn',
  CRASH_POINT: '',
  QUEUE_PREFIX: 'chaos',
  SHUTDOWN_GRACE_MS: '5000',
  IDEMPOTENCY_LEASE_MS: '2500',
  PROVIDER_TIMEOUT_MS: '300',
  PROVIDER_DEADLINE_MS: '1200',
  PROVIDER_MAX_ATTEMPTS: '3',
  PROVIDER_BACKOFF_BASE_MS: '20',
  PROVIDER_BACKOFF_CAP_MS: '200',
  PROVIDER_BREAKER_HALF_OPEN_MS: '1000',
  RECONCILE_INTERVAL_MS: '200',
  RECONCILE_STALE_AFTER_MS: '1000',
  RECONCILE_BACKOFF_BASE_MS: '200',
  RECONCILE_BACKOFF_CAP_MS: '2000',
  RECONCILE_MAX_ATTEMPTS: '8',
  RECONCILE_CONCURRENCY: '16',
  // A held send gives up after 1 s, a retry waits 2 s at most, and a killed worker's claim lasts 2·1 + 5 s.
  WEBHOOK_DISPATCH_INTERVAL_MS: '150',
  WEBHOOK_TIMEOUT_MS: '1000',
  WEBHOOK_BACKOFF_BASE_MS: '200',
  WEBHOOK_BACKOFF_CAP_MS: '2000',
  // The merchants' endpoints are the run's receiver, on loopback.
  WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
};

/**
 * How the merchants' endpoints misbehave: a share of first attempts answered
 * 500, and a share held past the send's timeout. Every later attempt is
 * accepted, so the receiver alone costs an event one retry at most.
 */
const ENDPOINT_FAULTS = { failFirst: 0.1, holdFirst: 0.03 };

function flakyEndpoint(random: Random): Behaviour {
  return (attempt) => {
    if (attempt > 0) return 204;
    const roll = random();
    if (roll < ENDPOINT_FAULTS.failFirst) return 500;
    return roll < ENDPOINT_FAULTS.failFirst + ENDPOINT_FAULTS.holdFirst ? 'hold' : 204;
  };
}

const EVENTS_POLL_MS = 250;

/** After Postgres is back, how long the APIs may take to be ready again before the outage counts as not recovered. */
const POSTGRES_RECOVERY_DEADLINE_MS = 30_000;

/**
 * How the merchants' clients (the client library, one instance per merchant)
 * are set up: what a careful integration configures. The retry budget and
 * Retry-After are the library's own; a call it gives up on is resumed with
 * its key within the operation's window of a minute.
 */
const CLIENT_SETTINGS = { timeoutMs: 3_000, maxRetries: 10, deadlineMs: 20_000, backoff: { baseMs: 100, capMs: 2_000 }, windowMs: 60_000 };

/**
 * The clients' timeout, which is also what counts as a hang. Direct, a
 * database that is down is answered in milliseconds. Through PgBouncer a
 * request sent while the server is down can be held in the pooler's queue
 * until the server is back (and the bouncer's next login, a second later) or
 * until query_wait_timeout, then answered: correct, but slower than 3 s, so
 * there the clients wait past the pooler's own bound.
 */
function clientTimeoutMs(pgbouncer: boolean): number {
  return pgbouncer ? QUERY_WAIT_TIMEOUT_S * 1000 + 2_000 : CLIENT_SETTINGS.timeoutMs;
}

function parseOptions(argv: string[]): ChaosOptions | 'help' {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      payments: { type: 'string', default: '300' },
      seconds: { type: 'string', default: '30' },
      concurrency: { type: 'string', default: '64' },
      clients: { type: 'string', default: '8' },
      seed: { type: 'string' },
      database: { type: 'string', default: 'payments_chaos' },
      'drain-seconds': { type: 'string', default: '120' },
      'events-seconds': { type: 'string', default: '60' },
      'failure-rate': { type: 'string', default: '0.3' },
      'poison-rate': { type: 'string', default: '0' },
      'postgres-restarts': { type: 'string', default: '0' },
      'postgres-down-seconds': { type: 'string', default: '3' },
      examples: { type: 'string', default: '5' },
      'output-dir': { type: 'string' },
      pgbouncer: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) return 'help';
  const int = (flag: string, value: string, min: number, max: number) => {
    const n = Number(value);
    if (!/^\d+$/.test(value) || n < min || n > max) throw new Error(`--${flag} must be an integer from ${min} to ${max}`);
    return n;
  };
  const ratio = (flag: string, value: string) => {
    if (!/^\d*\.?\d+$/.test(value) || Number(value) > 1) throw new Error(`--${flag} must be a number from 0 to 1`);
    return value;
  };
  if (!/^[a-z0-9_]*chaos[a-z0-9_]*$/.test(values.database)) {
    throw new Error('--database must be lower-case letters, digits and underscores, and contain "chaos": its tables are truncated');
  }
  return {
    payments: int('payments', values.payments, 1, 1_000_000),
    seconds: int('seconds', values.seconds, 1, 3_600),
    concurrency: int('concurrency', values.concurrency, 1, 1_000),
    clients: int('clients', values.clients, 1, 100),
    seed: values.seed === undefined ? Math.floor(Math.random() * 2 ** 31) : int('seed', values.seed, 0, 2 ** 31),
    database: values.database,
    drainSeconds: int('drain-seconds', values['drain-seconds'], 1, 3_600),
    eventsSeconds: int('events-seconds', values['events-seconds'], 1, 3_600),
    failureRate: values['failure-rate'],
    poisonRate: ratio('poison-rate', values['poison-rate']),
    postgresRestarts: int('postgres-restarts', values['postgres-restarts'], 0, 100),
    postgresDownSeconds: int('postgres-down-seconds', values['postgres-down-seconds'], 1, 60),
    pgbouncer: values.pgbouncer,
    examples: int('examples', values.examples, 0, 100),
    outputDir: values['output-dir'],
  };
}

/** A merchant's client, and the name of its endpoint on the receiver. */
interface Merchant extends ChaosClient {
  endpoint: string;
}

/**
 * Creates and migrates the run's database, empties it, and makes the
 * merchants as client:create makes them: an API key and a webhook endpoint on
 * the receiver, which is told the endpoint's secret.
 */
async function prepareDatabase(
  databaseUrl: string,
  merchants: number,
  receiver: WebhookReceiver,
  random: Random,
): Promise<{ dataSource: DataSource; clients: Merchant[] }> {
  const dataSource = await openScratchDatabase(databaseUrl);
  // The receivers listen on loopback.
  const sealing = { box: new SecretBox(secretsConfig()), policy: { allowPrivate: true } };
  const clients: Merchant[] = [];
  for (let i = 0; i < merchants; i++) {
    const endpoint = `merchant-${i}`;
    const created = await onboardClient(dataSource, sealing, `chaos merchant ${i}`, { webhookUrl: receiver.url(endpoint) });
    receiver.trust(endpoint, created.webhook_secret!);
    receiver.behave(endpoint, flakyEndpoint(random));
    clients.push({ id: created.id, apiKey: created.api_key, endpoint });
  }
  return { dataSource, clients };
}

async function readFinalState(
  dataSource: DataSource,
): Promise<{ payments: FinalPayment[]; keys: KeyRow[]; refunds: FinalRefund[]; refundKeys: RefundKeyRow[] }> {
  // A payment became terminal with its last status event: a refund of it later moves its updated_at (amount_refunded) too.
  const payments = (await dataSource.query(
    `SELECT p.id, p.status,
            extract(epoch FROM coalesce(
              (SELECT max(e.created_at) FROM events e WHERE e.client_id = p.client_id AND e.payment_id = p.id), p.updated_at
            ) - p.created_at)::float8 * 1000 AS ms
       FROM payments p`,
  )) as { id: string; status: PaymentStatus; ms: number }[];
  const keys = (await dataSource.query(`SELECT client_id, key, payment_id, refund_id FROM idempotency_keys`)) as {
    client_id: string;
    key: string;
    payment_id: string | null;
    refund_id: string | null;
  }[];
  const refunds = (await dataSource.query(`SELECT id, payment_id, amount, status FROM refunds`)) as {
    id: string;
    payment_id: string;
    amount: number;
    status: OperationStatus;
  }[];
  return {
    payments: payments.map((row) => ({ id: row.id, status: row.status, msToTerminal: row.ms })),
    keys: keys.flatMap((row) => (row.payment_id === null ? [] : [{ clientId: row.client_id, key: row.key, paymentId: row.payment_id }])),
    refunds: refunds.map((row) => ({ id: row.id, paymentId: row.payment_id, amount: row.amount, status: row.status })),
    refundKeys: keys.flatMap((row) => (row.refund_id === null ? [] : [{ clientId: row.client_id, key: row.key, refundId: row.refund_id }])),
  };
}

/**
 * Polls until no payment and no refund is pending, or the deadline passes. A
 * refund in review is not waited for: its re-check is an hour away, and the
 * verdict counts it as not terminal.
 */
async function waitUntilNothingPending(dataSource: DataSource, deadlineMs: number, intervalMs: number): Promise<void> {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    const [{ n }] = (await dataSource.query(
      `SELECT (SELECT count(*) FROM payments WHERE status = 'pending') + (SELECT count(*) FROM refunds WHERE status = 'pending') AS n`,
    )) as { n: string }[];
    if (Number(n) === 0 || Date.now() >= deadline) return;
    await delay(intervalMs);
  }
}

/**
 * Payments and refunds before events: a status change commits with its
 * event, so every status read has its event in the later read. The receipts
 * come last and only grow.
 */
async function readMerchantEvents(
  dataSource: DataSource,
  receiver: WebhookReceiver,
  merchants: readonly Merchant[],
): Promise<MerchantEventsInput> {
  type Owned = { id: string; client_id: string; status: OwnedPayment['status'] };
  const payments = (await dataSource.query(`SELECT id, client_id, status FROM payments`)) as Owned[];
  const refunds = (await dataSource.query(`SELECT id, client_id, status FROM refunds`)) as Owned[];
  const events = (await dataSource.query(
    `SELECT id, client_id, type, payment_id, refund_id, extract(epoch FROM created_at)::float8 * 1000 AS created_at_ms FROM events`,
  )) as { id: string; client_id: string; type: EventType; payment_id: string | null; refund_id: string | null; created_at_ms: number }[];
  const owned = (row: Owned) => ({ id: row.id, clientId: row.client_id, status: row.status });
  return {
    payments: payments.map(owned),
    refunds: refunds.map(owned),
    events: events.map((row) => ({
      id: row.id,
      clientId: row.client_id,
      type: row.type,
      paymentId: row.payment_id,
      refundId: row.refund_id,
      createdAtMs: row.created_at_ms,
    })),
    endpoints: merchants.map((merchant) => ({ clientId: merchant.id, receipts: receiver.receipts(merchant.endpoint) })),
  };
}

/** Polls until no event is missing or the deadline passes; the last read, which the verdict judges. */
async function waitUntilEventsDelivered(
  read: () => Promise<MerchantEventsInput>,
  deadlineMs: number,
): Promise<{ input: MerchantEventsInput; missing: number }> {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    const input = await read();
    const missing = missingEvents(input).length;
    if (missing === 0 || Date.now() >= deadline) return { input, missing };
    await delay(EVENTS_POLL_MS);
  }
}

function progress(line: string): void {
  process.stderr.write(`chaos: ${line}\n`);
}

async function main(): Promise<number> {
  const options = parseOptions(process.argv.slice(2));
  if (options === 'help') {
    process.stdout.write(USAGE);
    return 0;
  }
  // Its processes run in production mode, which refuses the development
  // secrets key: without a SECRETS_KEY of the caller's, the run seals and
  // opens its merchants' endpoint secrets with a key of its own (its
  // database and its processes are its own; nothing else needs the key).
  process.env.SECRETS_KEY ??= SecretBox.newKey();
  const base = loadConfigOrExit();
  const library = await loadClientLibrary();
  const startedAt = Date.now();
  progress(
    `seed ${options.seed}, ${options.payments} payments over ${options.seconds} s, database ${options.database}, ` +
      `provider failure rate ${options.failureRate}, poison rate ${options.poisonRate}, ${options.postgresRestarts} Postgres restarts` +
      (options.pgbouncer ? ', through PgBouncer' : ''),
  );

  let redis: PrivateRedis | undefined;
  let postgres: PrivatePostgres | undefined;
  let bouncer: PrivatePgBouncer | undefined;
  // The APIs, workers and provider leave with this process (their IPC
  // channel closes); redis-server, PgBouncer and Postgres do not, so they are killed on the way out.
  process.once('exit', () => {
    if (redis?.pid !== undefined) process.kill(redis.pid, 'SIGKILL');
    bouncer?.destroyNow();
    postgres?.destroyNow();
  });
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => process.exit(130));

  const outputDir = await outputFolder(options.outputDir);
  progress(`each process's output in ${outputDir}`);
  let violated = false;
  if (options.postgresRestarts > 0) postgres = await startPrivatePostgres();
  const databaseUrl = postgres ? postgres.urlFor(options.database) : databaseUrlNamed(base.databaseUrl, options.database);
  const receiver = await WebhookReceiver.start();
  const { dataSource, clients } = await prepareDatabase(databaseUrl, options.clients, receiver, mulberry32(options.seed + 3));
  if (options.pgbouncer) bouncer = await startPrivatePgBouncer({ serverPort: postgres?.port, poolSize: 20 });
  let fleet: Fleet | undefined;
  let provider: Awaited<ReturnType<typeof startProvider>> | undefined;
  try {
    redis = await startPrivateRedis();
    // Events go to the first API, which comes back on the same port after each
    // crash: deliveries that fail meanwhile are retried until it answers.
    const eventsPort = await freePort();
    const secret = `whsec_${randomBytes(32).toString('base64')}`;
    provider = await startProvider(
      {
        LOG_LEVEL: 'warn',
        PROVIDER_FAILURE_RATE: options.failureRate,
        PROVIDER_POISON_RATE: options.poisonRate,
        PROVIDER_SLOW_REPLY_MS: '600',
        PROVIDER_PENDING_SETTLE_MS: '1500',
        PROVIDER_WEBHOOK_URL: `http://127.0.0.1:${eventsPort}/v1/provider/events`,
        PROVIDER_WEBHOOK_SECRET: secret,
        PROVIDER_WEBHOOK_DUPLICATE_RATE: '0.3',
        PROVIDER_WEBHOOK_MAX_DELAY_MS: '500',
      },
      { outputDir },
    );
    const env = {
      ...SERVICE_KNOBS,
      DATABASE_URL: bouncer ? bouncer.urlFor(options.database) : databaseUrl,
      DATABASE_DIRECT_URL: databaseUrl,
      // A transaction-pooling bouncer keeps no prepared statement for a client:
      // the statements' plans are kept in server-side functions instead.
      DATABASE_PREPARED_STATEMENTS: bouncer ? 'functions' : 'true',
      REDIS_URL: redis.url,
      PROVIDER_URL: provider.url,
      PROVIDER_WEBHOOK_SECRET: secret,
    };
    fleet = await Fleet.start(env, { apis: 2, workers: 2, firstApiPort: eventsPort }, { outputDir }, progress);
    progress(
      `stack up in ${Date.now() - startedAt} ms: APIs ${fleet.urls.join(' ')}, provider ${provider.url}, redis ${redis.url}, ` +
        `merchant endpoints ${receiver.baseUrl}` +
        (postgres ? `, postgres on port ${postgres.port}` : '') +
        (bouncer ? `, pgbouncer on port ${bouncer.port}` : ''),
    );

    const durationMs = options.seconds * 1_000;
    const stopFaults = new AbortController();
    const faults = runFaults(
      fleet,
      redis,
      {
        durationMs,
        crashEveryMs: Math.min(15_000, Math.max(2_000, durationMs / 8)),
        downMs: 1_000,
        flushAtMs: durationMs / 2,
        postgres: postgres && {
          server: postgres,
          restarts: options.postgresRestarts,
          downMs: options.postgresDownSeconds * 1_000,
          recoveryDeadlineMs: POSTGRES_RECOVERY_DEADLINE_MS,
        },
      },
      mulberry32(options.seed + 1),
      stopFaults.signal,
      progress,
    );
    const operations = planOperations(options.payments, clients, mulberry32(options.seed));
    let finished = 0;
    const report = setInterval(() => progress(`${finished}/${options.payments} operations done`), 10_000).unref();
    const { exchanges, refunds: refundExchanges } = await runLoad(
      operations,
      { operations: options.payments, durationMs, concurrency: options.concurrency },
      {
        library,
        urls: fleet.urls,
        settings: { ...CLIENT_SETTINGS, timeoutMs: clientTimeoutMs(options.pgbouncer) },
        random: mulberry32(options.seed + 2),
      },
      (done) => (finished = done),
    );
    clearInterval(report);
    stopFaults.abort();
    const { counts: faultCounts, outages } = await faults;
    progress(
      `load done in ${Date.now() - startedAt} ms (${exchanges.length} payment and ${refundExchanges.length} refund exchanges); ` +
        `faults stopped (${JSON.stringify(faultCounts)}); draining`,
    );

    await waitUntilNothingPending(dataSource, options.drainSeconds * 1_000, 250);
    // Judged apart from the end's count: one settled only while events are awaited was still left open by the ladder.
    const pendingAfterDrain = (
      (await dataSource.query(`SELECT id FROM payments WHERE status = 'pending' ORDER BY id`)) as { id: string }[]
    ).map((row) => row.id);
    const refundsUndecidedAfterDrain = (
      (await dataSource.query(`SELECT id FROM refunds WHERE status IN ('pending', 'requires_review') ORDER BY id`)) as { id: string }[]
    ).map((row) => row.id);
    const drainedAt = Date.now();
    const { input: merchantEvents, missing } = await waitUntilEventsDelivered(
      () => readMerchantEvents(dataSource, receiver, clients),
      options.eventsSeconds * 1_000,
    );
    progress(`${merchantEvents.events.length} events, ${missing} without a 2xx, ${Date.now() - drainedAt} ms after the drain`);
    const audit = await runAudit(loadConfig(env), { maxExamples: options.examples, graceMs: 5_000 });
    const { payments, keys, refunds, refundKeys } = await readFinalState(dataSource);
    const verdict = judge({
      exchanges,
      payments,
      keys,
      refundExchanges,
      refunds,
      refundKeys,
      refundsUndecidedAfterDrain,
      audit,
      outages,
      unexpectedExits: fleet.unexpectedExits,
      pendingAfterDrain,
      merchantEvents,
      maxExamples: options.examples,
    });
    const line = { ...verdict, faults: faultCounts, seed: options.seed, seconds: Math.round((Date.now() - startedAt) / 1_000) };
    process.stdout.write(`${JSON.stringify(line)}\n`);
    violated = !verdict.ok;
    return verdict.ok ? 0 : 1;
  } finally {
    await fleet?.stop();
    await provider?.stop();
    await receiver.close();
    await redis?.kill();
    await bouncer?.stop();
    await dataSource.destroy();
    await postgres?.destroy();
    // After the stop, so every process has written its last line.
    if (violated) for (const line of await errorLines(outputDir, REPEATED_ERROR_LINES)) progress(line);
  }
}

if (require.main === module) {
  main().then(
    (code) => process.exit(code),
    (error: unknown) => {
      process.stderr.write(`chaos run could not be made: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
      process.exit(2);
    },
  );
}
