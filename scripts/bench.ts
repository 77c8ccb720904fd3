import 'reflect-metadata';
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import { ClientsRepository } from '../src/clients/clients.repository';
import { ClientsService } from '../src/clients/clients.service';
import type { DataSource } from 'typeorm';
import { IdempotencyRepository } from '../src/idempotency/idempotency.repository';
import { loadConfigOrExit } from '../src/config/app-config';
import { type ApiProcess, type ProviderProcess, startApiProcess, startProvider } from './lib/processes';
import { databaseUrlNamed, openScratchDatabase } from './lib/scratch-database';

/**
 * `npm run bench -- [--seconds 10] [--connections 10] [--json]`: the API as a
 * real process against the mock provider, loaded from this process over
 * loopback with autocannon. Three scenarios, each for --seconds:
 *
 * - create: a new Idempotency-Key per request: both transactions and a provider call;
 * - replay: one key over and over: the stored response, one indexed read;
 * - get: GET /v1/payments/:id;
 * - prune: --prune-keys expired keys (of final payments) deleted the way the
 *   worker does it, batch after batch, in keys per second: pruning keeps up
 *   as long as that stays well above the create rate.
 *
 * Figures are from one run on whatever machine runs it (the load generator
 * shares its cores with the API, Postgres and the provider): compare ratios and
 * medians from the same run, not absolute numbers across machines. Uses its own
 * database (payments_bench) and queue prefix, and leaves both behind.
 */
const BENCH_DATABASE = 'payments_bench';

interface Figures {
  requests: number;
  rps: number;
  p50_ms: number;
  p90_ms: number;
  p99_ms: number;
  errors: number;
  non_2xx: number;
}

const USAGE = `Usage: npm run bench -- [--seconds S] [--connections N] [--prune-keys N] [--json]

Load figures for create, replay and get against the API and the mock provider
as real processes, and key pruning in keys/s, on a database of its own
(${BENCH_DATABASE}, emptied first).
  --seconds S       per scenario, up to 300 (default 10)
  --connections N   concurrent connections, 1 to 200 (default 10)
  --prune-keys N    expired keys seeded for the prune figure (default 100000)
  --json            one JSON object instead of the table
`;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      seconds: { type: 'string', default: '10' },
      connections: { type: 'string', default: '10' },
      'prune-keys': { type: 'string', default: '100000' },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    process.stdout.write(USAGE);
    return;
  }
  const seconds = Number(values.seconds);
  const connections = Number(values.connections);
  const pruneKeys = Number(values['prune-keys']);
  if (!(seconds > 0 && seconds <= 300) || !(connections >= 1 && connections <= 200)) {
    throw new Error('--seconds must be in (0, 300] and --connections in [1, 200]');
  }
  if (!(Number.isInteger(pruneKeys) && pruneKeys >= 1_000 && pruneKeys <= 10_000_000)) {
    throw new Error('--prune-keys must be an integer in [1000, 10000000]');
  }

  const base = loadConfigOrExit();
  const databaseUrl = databaseUrlNamed(base.databaseUrl, BENCH_DATABASE);
  const dataSource = await openScratchDatabase(databaseUrl);
  let provider: ProviderProcess | undefined;
  let api: ApiProcess | undefined;
  try {
    const client = await new ClientsService(new ClientsRepository(dataSource)).create('bench');

    const quiet = { LOG_LEVEL: 'warn', DATABASE_URL: databaseUrl, QUEUE_PREFIX: 'bench' };
    provider = await startProvider(quiet);
    api = await startApiProcess({ ...quiet, PROVIDER_URL: provider.url, RATE_LIMIT_REQUESTS: '100000000' });

    const headers = { authorization: `Bearer ${client.api_key}`, 'content-type': 'application/json' };
    const body = JSON.stringify({ amount: 500, currency: 'USD', payment_method: 'pm_card_ok' });
    const post = { method: 'POST' as const, path: '/v1/payments', headers, body };

    const load = (title: string, request: autocannon.Request) =>
      autocannon({ title, url: api!.url, connections, duration: seconds, requests: [request] });

    // Warm up the JIT, the pools and Postgres's caches; not reported.
    await load('warm-up', { ...post, setupRequest: withNewKey });

    const replayKey = randomUUID();
    const first = await fetch(`${api.url}/v1/payments`, {
      method: 'POST',
      headers: { ...headers, 'idempotency-key': replayKey },
      body,
    });
    const paymentId = ((await first.json()) as { id: string }).id;

    const results: Record<string, Figures> = {
      create: figures(await load('create', { ...post, setupRequest: withNewKey })),
      replay: figures(await load('replay', { ...post, headers: { ...headers, 'idempotency-key': replayKey } })),
      get: figures(await load('get', { method: 'GET', path: `/v1/payments/${paymentId}`, headers })),
    };
    const [{ n: payments }] = (await dataSource.query('SELECT count(*)::int AS n FROM payments')) as { n: number }[];
    const charges = (await provider.charges()).length;
    const prune = await measurePrune(dataSource, client.id, pruneKeys, base.keyPrune.batchSize);
    const report = {
      seconds,
      connections,
      ...results,
      replay_vs_create_rps: round(results.replay.rps / results.create.rps),
      create_p50_vs_replay_p50: round(results.create.p50_ms / results.replay.p50_ms),
      prune,
      prune_vs_create_rate: round(prune.keys_per_s / results.create.rps),
      // Every payment made is charged exactly once, load or not.
      payments,
      charges,
    };
    process.stdout.write(values.json ? `${JSON.stringify(report)}\n` : table(report, results, prune));
  } finally {
    await api?.stop();
    await provider?.stop();
    await dataSource.destroy();
  }
}

/**
 * Seeds `count` expired keys of succeeded payments in one statement each, then
 * prunes them as the worker does, one batch after another, timing only that.
 */
async function measurePrune(
  dataSource: DataSource,
  clientId: string,
  count: number,
  batchSize: number,
): Promise<PruneFigures> {
  await dataSource.query(
    `INSERT INTO payments (id, client_id, amount, currency, payment_method, provider_key, status)
     SELECT 'pay_prune_' || g, $1, 100, 'USD', 'pm_card_ok', 'pk_pay_prune_' || g, 'succeeded'
       FROM generate_series(1, $2) g`,
    [clientId, count],
  );
  await dataSource.query(
    `INSERT INTO idempotency_keys
       (client_id, key, fingerprint, payment_id, response_status, response_body, completed_at, expires_at)
     SELECT $1, 'prune-' || g, repeat('0', 64), 'pay_prune_' || g, 201, '{}', now(), now() - interval '1 second'
       FROM generate_series(1, $2) g`,
    [clientId, count],
  );
  await dataSource.query('ANALYZE idempotency_keys');
  const keys = new IdempotencyRepository();
  const started = performance.now();
  let pruned = 0;
  for (let deleted = batchSize; deleted === batchSize; pruned += deleted) {
    deleted = await keys.pruneExpired(dataSource.manager, batchSize);
  }
  const seconds = (performance.now() - started) / 1000;
  return { keys: pruned, seconds: round(seconds), keys_per_s: Math.round(pruned / seconds) };
}

function withNewKey(request: autocannon.Request): autocannon.Request {
  return { ...request, headers: { ...request.headers, 'idempotency-key': randomUUID() } };
}

function figures(result: autocannon.Result): Figures {
  return {
    requests: result.requests.total,
    rps: round(result.requests.average),
    p50_ms: result.latency.p50,
    p90_ms: result.latency.p90,
    p99_ms: result.latency.p99,
    errors: result.errors,
    non_2xx: result.non2xx,
  };
}

function round(value: number): number {
  return Math.round(value * 100) / 100;
}

interface PruneFigures {
  keys: number;
  seconds: number;
  keys_per_s: number;
}

function table(report: Record<string, unknown>, results: Record<string, Figures>, prune: PruneFigures): string {
  const header = 'scenario   requests     req/s   p50 ms   p90 ms   p99 ms   errors   non-2xx';
  const rows = Object.entries(results).map(([name, f]) =>
    [
      name.padEnd(8),
      String(f.requests).padStart(10),
      f.rps.toFixed(0).padStart(9),
      String(f.p50_ms).padStart(8),
      String(f.p90_ms).padStart(8),
      String(f.p99_ms).padStart(8),
      String(f.errors).padStart(8),
      String(f.non_2xx).padStart(9),
    ].join(' '),
  );
  return [
    `${report.connections} connections, ${report.seconds} s per scenario`,
    header,
    ...rows,
    `replay/create throughput: ${report.replay_vs_create_rps}x; payments ${report.payments}, provider charges ${report.charges}`,
    `prune: ${prune.keys} expired keys at ${prune.keys_per_s} keys/s, ${report.prune_vs_create_rate}x the create rate`,
    '',
  ].join('\n');
}

main().catch((error: unknown) => {
  process.stderr.write(`bench failed: ${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(1);
});
