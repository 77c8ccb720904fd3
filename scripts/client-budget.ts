import 'reflect-metadata';
import { randomBytes, randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import type * as Client from '../client/src/index.js';
import { ClientsRepository } from '../src/clients/clients.repository';
import { ClientsService } from '../src/clients/clients.service';
import { loadConfigOrExit } from '../src/config/app-config';
import { loadClientLibrary } from './lib/client-library';
import { type PrivatePostgres, startPrivatePostgres } from '../test/support/private-postgres';
import { type ApiProcess, startApiProcess } from '../test/support/processes';
import { openScratchDatabase } from '../test/support/scratch-database';
import { dropWorkerQueues } from '../test/support/worker-queues';

const USAGE = `Usage: npm run client:budget -- [options]

  --clients N       client instances per row of the table (default 20)
  --operations M    payments each instance makes (default 300)
  --seconds S       each instance starts its payments evenly over S seconds (default 120)
  --max-retries R   the clients' maxRetries (default 3, the client's default)
  --json            one JSON object instead of the table

The retry budget of the client library (client/) on the real stack: the
seeds' outage experiment, with PaymentsClient instances (the built package,
client/dist) as the clients. It starts a private Postgres cluster, migrates it,
makes an API key, starts the payments API on it (and the machine's Redis,
under a queue prefix of its own), then stops Postgres: from then on every
answer of the API is 503 service_unavailable with Retry-After: 1. Two fleets
of N instances then make M payments apiece, side by side, one with the
default retry budget (ratio 0.1, burst 10) and one without, and the table
says how many requests each sent per payment: 1 + maxRetries without the
budget, about 1 + ratio + burst/M with it. The defaults make the seeds' 6,000
first attempts, at half their rate (one API process must keep up). Needs \`npm run build\`, Postgres' server
binaries (scripts/install-test-prerequisites) and Redis (REDIS_URL).
`;

export interface FleetOptions {
  /** Client instances. */
  clients: number;
  /** Payments per instance. */
  operations: number;
  /** Each instance starts its payments evenly over this many seconds. */
  seconds: number;
  maxRetries: number;
}

/** What one fleet did: its payments' first attempts, every request it sent, and how each call ended. */
export interface FleetRun {
  first: number;
  requests: number;
  /** requests / first. */
  load: number;
  /** Each answer the fleet got, by status, or `network <code>` for none: {"503": 24000}. */
  answers: Record<string, number>;
  /** onGiveUp calls, by reason. */
  gaveUp: Record<string, number>;
  /** Calls that rejected without onGiveUp hearing of it: 0, or the client is broken. */
  silent: number;
  succeeded: number;
}

export const BUDGET = { ratio: 0.1, burst: 10 } as const;
/**
 * The seeds' outage has 6,000 first attempts (100 a second for 60 s): here 20
 * clients of 300 payments each, at half the rate, over 120 s. The fleet
 * without a budget sends four times that, about 200 requests a second, and
 * one API process answering 503s on a two-core machine keeps up with about
 * 300: at the seeds' rate it fell behind, and its answers turned into
 * timeouts.
 */
export const DEFAULTS: FleetOptions = { clients: 20, operations: 300, seconds: 120, maxRetries: 3 };

/**
 * N instances of `PaymentsClient`, each making M payments, one every S/M
 * seconds (the instances staggered within that interval), each payment its
 * own call with its own retries: the seeds' outage model, a steady stream of
 * first attempts against an API that fails them all. Requests are counted by
 * a fetch of our own under each instance.
 */
export async function runFleet(
  PaymentsClient: typeof Client.PaymentsClient,
  target: { baseUrl: string; apiKey: string; fetch?: typeof fetch },
  options: FleetOptions,
  budget: Client.RetryBudgetOptions | false,
): Promise<FleetRun> {
  const send = target.fetch ?? ((input, init) => globalThis.fetch(input, init));
  const run: FleetRun = { first: 0, requests: 0, load: 0, answers: {}, gaveUp: {}, silent: 0, succeeded: 0 };
  const count = (tally: Record<string, number>, name: string) => (tally[name] = (tally[name] ?? 0) + 1);
  const counting: typeof fetch = async (input, init) => {
    run.requests++;
    try {
      const response = await send(input, init);
      count(run.answers, String(response.status));
      return response;
    } catch (error) {
      count(run.answers, `network ${networkCode(error)}`);
      throw error;
    }
  };
  const intervalMs = (options.seconds * 1_000) / options.operations;
  const calls: Promise<void>[] = [];
  for (let instance = 0; instance < options.clients; instance++) {
    let giveUps = 0;
    const client = new PaymentsClient({
      baseUrl: target.baseUrl,
      apiKey: target.apiKey,
      maxRetries: options.maxRetries,
      retryBudget: budget,
      // Room for every attempt the rules allow even when the API is slow to answer: the figures are the
      // client's rules, not the machine's speed (the answers say whether the API kept up).
      deadlineMs: 600_000,
      timeoutMs: 60_000,
      fetch: counting,
      onGiveUp: (info) => {
        giveUps++;
        count(run.gaveUp, info.reason);
      },
    });
    const offsetMs = (instance * intervalMs) / options.clients;
    for (let n = 0; n < options.operations; n++) {
      calls.push(
        (async () => {
          await new Promise((started) => setTimeout(started, offsetMs + n * intervalMs));
          run.first++;
          const before = giveUps;
          try {
            await client.payments.create({ amount: 100 + n, currency: 'USD', payment_method: 'pm_card_ok' });
            run.succeeded++;
          } catch {
            if (giveUps === before) run.silent++;
          }
        })(),
      );
    }
  }
  await Promise.all(calls);
  run.load = run.requests / run.first;
  return run;
}

/** A failed fetch's reason: its cause's code (ECONNRESET, UND_ERR_SOCKET…), or the error's name (TimeoutError). */
function networkCode(error: unknown): string {
  const cause = (error as { cause?: { code?: unknown } } | undefined)?.cause;
  if (typeof cause?.code === 'string') return cause.code;
  return error instanceof Error ? error.name : String(error);
}

/** The table, as the seeds print theirs. */
export function formatTable(options: FleetOptions, without: FleetRun, withBudget: FleetRun): string {
  const row = (label: string, run: FleetRun) =>
    `${label.padEnd(30)}${String(run.first).padStart(6)}${String(run.requests).padStart(10)}${`${run.load.toFixed(2)}x`.padStart(8)}`;
  const answers = (run: FleetRun) =>
    Object.entries(run.answers)
      .map(([status, n]) => `${status} x ${n}`)
      .join(', ');
  return [
    `Client retry budget: ${options.clients} clients x ${options.operations} payments over ${options.seconds} s each, ` +
      `an API whose every answer is 503, up to ${options.maxRetries} retries each`,
    `${'budget'.padEnd(30)}${'first'.padStart(6)}${'requests'.padStart(10)}${'load'.padStart(8)}`,
    row('without', without),
    row(`with (burst ${BUDGET.burst}, ratio ${BUDGET.ratio})`, withBudget),
    '',
    `expected: without 1 + maxRetries = ${(1 + options.maxRetries).toFixed(2)}x; ` +
      `with at most 1 + ratio + burst/M = ${(1 + BUDGET.ratio + BUDGET.burst / options.operations).toFixed(2)}x`,
    `answers: without ${answers(without)}; with ${answers(withBudget)}`,
    `given up: without ${JSON.stringify(without.gaveUp)}, with ${JSON.stringify(withBudget.gaveUp)}; ` +
      `silently ${without.silent + withBudget.silent}`,
    '',
  ].join('\n');
}

function parseOptions(argv: string[]): (FleetOptions & { json: boolean }) | 'help' {
  const { values } = parseArgs({
    args: argv,
    options: {
      clients: { type: 'string' },
      operations: { type: 'string' },
      seconds: { type: 'string' },
      'max-retries': { type: 'string' },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) return 'help';
  const int = (name: string, value: string | undefined, fallback: number, min: number, max: number): number => {
    if (value === undefined) return fallback;
    const parsed = Number(value);
    if (!/^\d+$/.test(value) || parsed < min || parsed > max) throw new Error(`--${name} must be an integer from ${min} to ${max}, got ${value}`);
    return parsed;
  };
  return {
    clients: int('clients', values.clients, DEFAULTS.clients, 1, 1_000),
    operations: int('operations', values.operations, DEFAULTS.operations, 1, 100_000),
    seconds: int('seconds', values.seconds, DEFAULTS.seconds, 1, 3_600),
    maxRetries: int('max-retries', values['max-retries'], DEFAULTS.maxRetries, 0, 20),
    json: values.json,
  };
}

function progress(line: string): void {
  process.stderr.write(`client:budget: ${line}\n`);
}

async function main(): Promise<void> {
  let options: ReturnType<typeof parseOptions>;
  try {
    options = parseOptions(process.argv.slice(2));
  } catch (error) {
    // parseArgs' own refusals (an unknown option, a missing value) are usage errors too.
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n\n${USAGE}`);
    process.exitCode = 2;
    return;
  }
  if (options === 'help') {
    process.stdout.write(USAGE);
    return;
  }
  const base = loadConfigOrExit();
  // The package as npm pack ships it, not its sources.
  const { PaymentsClient } = await loadClientLibrary();
  const queuePrefix = `client-budget-${randomUUID().slice(0, 8)}`;
  let postgres: PrivatePostgres | undefined;
  let api: ApiProcess | undefined;
  process.once('exit', () => postgres?.destroyNow());
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => process.exit(130));
  try {
    postgres = await startPrivatePostgres();
    const databaseUrl = postgres.urlFor('payments_client_budget');
    const dataSource = await openScratchDatabase(databaseUrl);
    const { api_key: apiKey } = await new ClientsService(new ClientsRepository(dataSource)).create('client budget');
    await dataSource.destroy();
    api = await startApiProcess({
      NODE_ENV: 'production',
      // Each 503 is an error line otherwise: thousands a second, which the API would spend its time writing.
      LOG_LEVEL: 'silent',
      CRASH_POINT: '',
      PROVIDER_WEBHOOK_SECRET: `whsec_${randomBytes(32).toString('base64')}`,
      DATABASE_URL: databaseUrl,
      REDIS_URL: base.redisUrl,
      QUEUE_PREFIX: queuePrefix,
      // Nothing reaches the provider: the database is down before the first payment.
      PROVIDER_URL: 'http://127.0.0.1:9',
      // The fleets share one API key: its rate limit would answer 429 long before the outage ends.
      RATE_LIMIT_REQUESTS: '100000000',
    });
    await postgres.stop();
    const probe = await fetch(`${api.url}/v1/payments`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${apiKey}`, 'Idempotency-Key': randomUUID(), 'Content-Type': 'application/json' },
      body: JSON.stringify({ amount: 100, currency: 'USD', payment_method: 'pm_card_ok' }),
    });
    const probed = `${probe.status} ${((await probe.json()) as { error?: { code?: string } }).error?.code} Retry-After: ${probe.headers.get('retry-after')}`;
    if (probe.status !== 503) throw new Error(`the API with its database down answered ${probed}, not 503`);
    progress(`API ${api.url} up with its database stopped: it answers ${probed}; two fleets of ${options.clients} clients start`);

    const target = { baseUrl: api.url, apiKey };
    const [without, withBudget] = await Promise.all([
      runFleet(PaymentsClient, target, options, false),
      runFleet(PaymentsClient, target, options, BUDGET),
    ]);
    if (options.json) {
      process.stdout.write(`${JSON.stringify({ ...options, json: undefined, budget: BUDGET, without, with: withBudget })}\n`);
    } else {
      process.stdout.write(formatTable(options, without, withBudget));
    }
    if (without.silent + withBudget.silent > 0) process.exitCode = 1;
  } finally {
    await api?.stop();
    await postgres?.destroy();
    postgres = undefined;
    await dropWorkerQueues(base.redisUrl, queuePrefix);
  }
}

if (require.main === module) {
  main().catch((error: unknown) => {
    process.stderr.write(`client:budget failed: ${error instanceof Error ? error.stack : String(error)}\n`);
    process.exit(2);
  });
}
