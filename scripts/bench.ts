import 'reflect-metadata';
import { randomUUID } from 'node:crypto';
import { cpus, loadavg } from 'node:os';
import { setTimeout as delay } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import type autocannon from 'autocannon';
import type { DataSource } from 'typeorm';
import { ClientsRepository } from '../src/clients/clients.repository';
import { ClientsService } from '../src/clients/clients.service';
import { loadConfigOrExit } from '../src/config/app-config';
import { IdempotencyRepository } from '../src/ledger/idempotency.repository';
import { type Analyzer, keepStatisticsCurrent } from './bench/analyzer';
import { type BacklogFigures, drainBacklog } from './bench/backlog';
import { DatabaseCpu } from './bench/database-cpu';
import { benchDatabase, integerIn } from './bench/options';
import {
  type Figures,
  type SoakFigures,
  type StormFigures,
  load,
  round,
  soak,
  storm,
  withNewKey,
} from './bench/measure';
import { type ManagedProcess, startApiProcess, startHttpProcess } from '../test/support/processes';
import { partitionByClient } from '../test/support/partition-by-client';
import { databaseUrlNamed, openScratchDatabase } from '../test/support/scratch-database';
import { dropWorkerQueues } from '../test/support/worker-queues';

const LOADS = ['create', 'refund', 'replay', 'get', 'list'] as const;
const SCENARIOS = [...LOADS, 'storm', 'prune', 'backlog'] as const;
type Load = (typeof LOADS)[number];
type Scenario = (typeof SCENARIOS)[number];

/** How many payments the refund load takes in turn: enough that 200 connections rarely meet on one payment's lock. */
const REFUND_POOL = 400;

const USAGE = `Usage: npm run bench -- [--scenarios LIST] [--seconds S] [--connections N] [--json] ...

Load figures of the API as a real process, calling one stub provider, loaded
over loopback with autocannon on a database of the bench's own.

  --scenarios LIST   comma-separated, of ${SCENARIOS.join(', ')}
                     (default: all of them; soak runs when --soak-seconds > 0)
                       create   a new Idempotency-Key per request: two statements and a provider call
                       refund   the same for POST /v1/refunds: 1 cent of one of ${REFUND_POOL} succeeded
                                payments, taken in turn
                       replay   one key again and again: the stored answer
                       get      GET /v1/payments/:id
                       list     GET /v1/payments?limit=10
                       storm    --storm-requests at once on ONE key: one payment, one charge,
                                every answer the 201, a byte-equal replay or a 409, all
                                within 2 s of the first
                       prune    --prune-keys expired keys deleted as the worker does, in keys/s
                       backlog  --backlog stale pending payments drained by one worker (production
                                knobs, stale after 1 s), in payments/s, and creates alone vs during
  --seconds S        per scenario, 1 to 300 (default 10)
  --warmup S         creates before measuring, 0 to 60 (default 3)
  --connections N    concurrent connections, 1 to 200 (default 16)
  --storm-requests N requests of the storm, 2 to 5000 (default 1000)
  --backlog N        stale pending payments to drain, 1 to 100000 (default 10000)
  --prune-keys N     expired keys for prune, 1000 to 10000000 (default 100000)
  --soak-seconds N   then creates for N s, sampling the API's RSS (default 0: off)
  --database NAME    its database, on the server of DATABASE_URL; the name must
                     contain "bench"; created if missing, emptied first (default
                     payments_bench). Its BullMQ prefix is the same name, also emptied.
  --partitions N     rebuild the database with every client-keyed table hash-partitioned
                     by client_id in N partitions, 2 to 64, to measure what that costs
                     (docs/scaling.md); once: a database partitioned before keeps its
                     partitions, so give such a database a name of its own
  --no-analyze       where the server's autovacuum is off, leave the tables
                     unanalyzed instead of running ANALYZE every 5 s (README,
                     Operations: what stale statistics cost)
  --cpu-prof DIR     run the API (and the backlog's worker) under node --cpu-prof, writing each profile to DIR on exit
  --json             one JSON object instead of the table

What a run costs: about 10 s of start-up, then --warmup, then --seconds for
each of create, refund, replay, get, list; storm about 2 s; prune a few seconds per
100,000 keys; backlog 2 x --seconds plus however long the drain outlasts them
(the goal is 60 s for 10,000); soak --soak-seconds. The defaults take about
2 minutes. Exits 1 when the storm makes more than one payment or charge or
any other answer than the 201, a byte-equal replay or a 409, the backlog is
not drained, or payments and provider charges (refunds and provider
refunds) differ; the latency goals
(storm within 2 s, creates at most 20 % slower during the drain) are
reported, not enforced.
`;

interface Options {
  scenarios: Scenario[];
  seconds: number;
  warmup: number;
  connections: number;
  stormRequests: number;
  backlog: number;
  pruneKeys: number;
  soakSeconds: number;
  database: string;
  partitions?: number;
  cpuProf?: string;
  analyze: boolean;
  json: boolean;
}

function parseOptions(): Options | undefined {
  const { values } = parseArgs({
    options: {
      scenarios: { type: 'string', default: SCENARIOS.join(',') },
      seconds: { type: 'string', default: '10' },
      warmup: { type: 'string', default: '3' },
      connections: { type: 'string', default: '16' },
      'storm-requests': { type: 'string', default: '1000' },
      backlog: { type: 'string', default: '10000' },
      'prune-keys': { type: 'string', default: '100000' },
      'soak-seconds': { type: 'string', default: '0' },
      database: { type: 'string', default: 'payments_bench' },
      partitions: { type: 'string' },
      'cpu-prof': { type: 'string' },
      'no-analyze': { type: 'boolean', default: false },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) return undefined;
  const scenarios = values.scenarios.split(',').map((name) => name.trim());
  const unknown = scenarios.filter((name) => !(SCENARIOS as readonly string[]).includes(name));
  if (unknown.length > 0) throw new Error(`unknown scenario ${unknown.join(', ')}; known: ${SCENARIOS.join(', ')}`);
  return {
    scenarios: scenarios as Scenario[],
    seconds: integerIn('seconds', values.seconds, 1, 300),
    warmup: integerIn('warmup', values.warmup, 0, 60),
    connections: integerIn('connections', values.connections, 1, 200),
    stormRequests: integerIn('storm-requests', values['storm-requests'], 2, 5_000),
    backlog: integerIn('backlog', values.backlog, 1, 100_000),
    pruneKeys: integerIn('prune-keys', values['prune-keys'], 1_000, 10_000_000),
    soakSeconds: integerIn('soak-seconds', values['soak-seconds'], 0, 86_400),
    database: benchDatabase(values.database),
    partitions: values.partitions === undefined ? undefined : integerIn('partitions', values.partitions, 2, 64),
    cpuProf: values['cpu-prof'],
    analyze: !values['no-analyze'],
    json: values.json,
  };
}

/** A load's figures, under `api` as readers of the JSON (bench-standby) take them. */
interface LoadResult {
  api: Figures;
}

interface Report {
  machine: { cpus: number; load_average_at_start: number[]; load_average_at_end: number[] };
  database: string;
  /** Who keeps the planner's statistics current while the tables grow (see keepStatisticsCurrent). */
  statistics: Analyzer['statistics'];
  seconds: number;
  warmup_seconds: number;
  connections: number;
  loads: Partial<Record<Load, LoadResult>>;
  storm?: StormFigures;
  prune?: { keys: number; seconds: number; keys_per_s: number };
  backlog?: BacklogFigures;
  soak?: SoakFigures;
  payments: number;
  provider_charges: number;
  refunds: number;
  provider_refunds: number;
  elapsed_s: number;
  ok: boolean;
}

async function main(): Promise<void> {
  const options = parseOptions();
  if (!options) {
    process.stdout.write(USAGE);
    return;
  }
  const startedAt = performance.now();
  const loadAtStart = loadavg().map((value) => round(value));
  const base = loadConfigOrExit();
  const databaseUrl = databaseUrlNamed(base.databaseUrl, options.database);
  const queuePrefix = options.database;
  const dataSource = await openScratchDatabase(databaseUrl);
  if (options.partitions !== undefined) await partitionByClient(dataSource, options.partitions);
  await dropWorkerQueues(base.redisUrl, queuePrefix);
  const analyzer = await keepStatisticsCurrent(databaseUrl, options.analyze);
  const children: ManagedProcess[] = [];
  try {
    const clients = new ClientsService(new ClientsRepository(dataSource));
    const client = await clients.create('bench');
    const env = { LOG_LEVEL: 'warn', DATABASE_URL: databaseUrl, QUEUE_PREFIX: queuePrefix };
    const provider = await startHttpProcess('stub-provider', 'scripts/bench/stub-provider.js', '/health', { PORT: '0' });
    children.push(provider);
    const serviceEnv = { ...env, PROVIDER_URL: provider.url, PORT: '0' };
    const api = await startApiProcess({
      ...serviceEnv,
      RATE_LIMIT_REQUESTS: '100000000',
      ...(options.cpuProf && { NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${options.cpuProf}` }),
    });
    children.push(api);

    const headers = { authorization: `Bearer ${client.api_key}`, 'content-type': 'application/json' };
    const body = JSON.stringify({ amount: 500, currency: 'USD', payment_method: 'pm_card_ok' });
    const create: autocannon.Request = { method: 'POST', path: '/v1/payments', headers, body, setupRequest: withNewKey };
    const loadOptions = {
      connections: options.connections,
      seconds: options.seconds,
      databaseCpu: new DatabaseCpu(dataSource, options.database),
    };

    if (options.warmup > 0) await load(api, create, { ...loadOptions, seconds: options.warmup });
    const { replayKey, paymentId } = await onePayment(api.url, headers, body);
    const refundable = options.scenarios.includes('refund') ? await refundablePayments(api.url, headers) : [];
    const requests: Record<Load, autocannon.Request> = {
      create,
      refund: { method: 'POST', path: '/v1/refunds', headers, setupRequest: refundOfNext(refundable) },
      replay: { method: 'POST', path: '/v1/payments', headers: { ...headers, 'idempotency-key': replayKey }, body },
      get: { method: 'GET', path: `/v1/payments/${paymentId}`, headers },
      list: { method: 'GET', path: '/v1/payments?limit=10', headers },
    };

    const report: Report = {
      machine: { cpus: cpus().length, load_average_at_start: loadAtStart, load_average_at_end: [] },
      database: options.database,
      statistics: analyzer.statistics,
      seconds: options.seconds,
      warmup_seconds: options.warmup,
      connections: options.connections,
      loads: {},
      payments: 0,
      provider_charges: 0,
      refunds: 0,
      provider_refunds: 0,
      elapsed_s: 0,
      ok: true,
    };
    for (const name of LOADS.filter((scenario) => options.scenarios.includes(scenario))) {
      report.loads[name] = { api: await load(api, requests[name], loadOptions) };
    }

    if (options.scenarios.includes('storm')) {
      const stormClient = await clients.create('bench storm');
      const stormHeaders = { ...headers, authorization: `Bearer ${stormClient.api_key}` };
      report.storm = await storm(api.url, { headers: stormHeaders, body }, options.stormRequests, async () => {
        const ids = (await dataSource.query('SELECT id FROM payments WHERE client_id = $1', [stormClient.id])) as { id: string }[];
        let charges = 0;
        for (const { id } of ids) charges += ((await (await fetch(`${provider.url}/charges?reference=${id}`)).json()) as unknown[]).length;
        return { payments: ids.length, charges };
      });
      report.ok &&= report.storm.ok;
    }
    if (options.scenarios.includes('prune')) {
      report.prune = await measurePrune(dataSource, client.id, options.pruneKeys, base.keyPrune.batchSize);
    }
    if (options.scenarios.includes('backlog')) {
      const backlogClient = await clients.create('bench backlog');
      report.backlog = await drainBacklog(dataSource, {
        clientId: backlogClient.id,
        count: options.backlog,
        api,
        create,
        ...loadOptions,
        workerEnv: {
          ...env,
          PROVIDER_URL: provider.url,
          ...(options.cpuProf && { NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${options.cpuProf}` }),
        },
      });
      report.ok &&= report.backlog.ok;
    }
    if (options.soakSeconds > 0) {
      report.soak = await soak(api, create, { ...loadOptions, seconds: options.soakSeconds });
    }

    // The prune's seeded payments never met the provider; every other one must have, once.
    const tally = await settledTally(dataSource, provider.url);
    report.payments = tally.payments;
    report.provider_charges = tally.charges;
    report.refunds = tally.refunds;
    report.provider_refunds = tally.providerRefunds;
    report.ok &&= report.payments === report.provider_charges && report.refunds === report.provider_refunds;
    report.machine.load_average_at_end = loadavg().map((value) => round(value));
    report.elapsed_s = round((performance.now() - startedAt) / 1000, 1);
    process.stdout.write(options.json ? `${JSON.stringify(report)}\n` : table(report));
    if (!report.ok) process.exitCode = 1;
  } finally {
    for (const child of children.reverse()) await child.stop();
    await analyzer.stop();
    await dropWorkerQueues(base.redisUrl, queuePrefix);
    await dataSource.destroy();
  }
}

/** One succeeded payment of `body`, under a key of its own. */
async function onePayment(
  url: string,
  headers: Record<string, string>,
  body: string,
): Promise<{ replayKey: string; paymentId: string }> {
  const key = randomUUID();
  const response = await fetch(`${url}/v1/payments`, { method: 'POST', headers: { ...headers, 'idempotency-key': key }, body });
  if (response.status !== 201) throw new Error(`a bench payment answered ${response.status}`);
  return { replayKey: key, paymentId: ((await response.json()) as { id: string }).id };
}

/**
 * Payments and provider charges, refunds and provider refunds, once they
 * agree, or as they stand after 10 s. A request still in flight when a load
 * stopped may be between its row's commit and its provider call, so one read
 * of each can differ by the requests in flight without anything being
 * wrong; counts that still differ once everything has had time to finish
 * are a real mismatch.
 */
async function settledTally(
  dataSource: DataSource,
  providerUrl: string,
): Promise<{ payments: number; charges: number; refunds: number; providerRefunds: number }> {
  const deadline = performance.now() + 10_000;
  for (;;) {
    const [{ payments, refunds }] = (await dataSource.query(
      `SELECT (SELECT count(*)::int FROM payments WHERE id NOT LIKE 'pay_prune_%') AS payments,
              (SELECT count(*)::int FROM refunds) AS refunds`,
    )) as { payments: number; refunds: number }[];
    const stats = (await (await fetch(`${providerUrl}/stats`)).json()) as { charges: number; refunds: number };
    const tally = { payments, charges: stats.charges, refunds, providerRefunds: stats.refunds };
    if ((payments === stats.charges && refunds === stats.refunds) || performance.now() > deadline) return tally;
    await delay(100);
  }
}

/** REFUND_POOL succeeded payments of the most a payment may be, so that each can be refunded a cent at a time for any load. */
async function refundablePayments(url: string, headers: Record<string, string>): Promise<string[]> {
  const body = JSON.stringify({ amount: 99_999_999, currency: 'USD', payment_method: 'pm_card_ok' });
  const ids: string[] = [];
  while (ids.length < REFUND_POOL) {
    const batch = await Promise.all(Array.from({ length: 20 }, () => onePayment(url, headers, body)));
    ids.push(...batch.map((payment) => payment.paymentId));
  }
  return ids;
}

/** Each request a new key and a cent of the next payment of `payments`, in turn. */
function refundOfNext(payments: string[]): (request: autocannon.Request) => autocannon.Request {
  let next = 0;
  return (request) => {
    const payment = payments[next++ % payments.length];
    return withNewKey({ ...request, body: JSON.stringify({ payment, amount: 1 }) });
  };
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
): Promise<{ keys: number; seconds: number; keys_per_s: number }> {
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
    deleted = await keys.pruneExpired(dataSource.manager, clientId, batchSize);
  }
  const seconds = (performance.now() - started) / 1000;
  return { keys: pruned, seconds: round(seconds), keys_per_s: Math.round(pruned / seconds) };
}

function table(report: Report): string {
  const lines = [
    `${report.connections} connections, ${report.seconds} s per scenario after ${report.warmup_seconds} s of warm-up; ` +
      `${report.machine.cpus} cores, load average ${report.machine.load_average_at_start[0]} at start, ` +
      `${report.machine.load_average_at_end[0]} at end; statistics: ${report.statistics}`,
    'scenario    requests    req/s  p50 ms  p90 ms  p99 ms  max ms  errors  non-2xx  cpu ms/req  pg ms/req',
  ];
  for (const [name, { api: f }] of Object.entries(report.loads)) {
    lines.push(
      [
        name.padEnd(8),
        String(f.requests).padStart(11),
        f.rps.toFixed(0).padStart(8),
        String(f.p50_ms).padStart(7),
        String(f.p90_ms).padStart(7),
        String(f.p99_ms).padStart(7),
        String(f.max_ms).padStart(7),
        String(f.errors).padStart(7),
        String(f.non_2xx).padStart(8),
        f.cpu_ms_per_request.toFixed(2).padStart(11),
        (f.postgres_cpu_ms_per_request?.toFixed(2) ?? '-').padStart(10),
      ].join(' '),
    );
  }
  const s = report.storm;
  if (s) {
    lines.push(
      `storm: ${s.requests} requests on one key: ${s.payments} payment, ${s.charges} charge; ${s.created} created, ` +
        `${s.replays} replays, ${s.in_use} in use, ${s.other} other (statuses ${JSON.stringify(s.statuses)}); answers from ${s.first_answer_ms} to ` +
        `${s.last_answer_ms} ms (spread ${s.spread_ms} ms, ${s.within_2s ? 'within' : 'NOT within'} 2 s): ` +
        `${s.ok ? 'ok' : 'FAILED'}`,
    );
  }
  const p = report.prune;
  if (p) lines.push(`prune: ${p.keys} expired keys in ${p.seconds} s, ${p.keys_per_s} keys/s`);
  const b = report.backlog;
  if (b) {
    lines.push(
      `backlog: ${b.payments} stale pending payments drained by one worker in ${b.drain_s} s, ${b.payments_per_s}/s ` +
        `(concurrency ${b.concurrency}), ${b.left_pending} left; creates ${b.create_alone.rps.toFixed(0)} req/s alone, ` +
        `${b.create_during_drain.rps.toFixed(0)} during the drain (${b.create_slowdown_pct} % slower, ` +
        `${b.slowed_over_20pct ? 'MORE' : 'not more'} than 20 %${b.load_within_drain ? '' : '; the drain ended before the load'}): ` +
        `${b.ok ? 'ok' : 'FAILED'}`,
    );
  }
  const k = report.soak;
  if (k) {
    const samples = k.samples.map((sample) => `${sample.t_s}s:${sample.rss_mb}`).join(' ');
    const end = k.samples[k.samples.length - 1];
    const heap = k.heap_at_end;
    lines.push(
      `soak: ${k.seconds} s of creates at ${k.rps.toFixed(0)} req/s; API RSS MB ${samples}; trend ${k.rss_mb_per_min} MB/min, ${k.rss_mb_per_min_second_half} over the second half`,
      `soak: at the end RSS ${end.rss_mb} MB = ${end.anon_mb} anonymous + ${end.file_mb} file-backed` +
        (heap ? `; V8 heap ${heap.heap_total_mb} MB (${heap.heap_used_mb} used), external ${heap.external_mb} MB` : ''),
    );
  }
  lines.push(
    `payments ${report.payments}, provider charges ${report.provider_charges}; refunds ${report.refunds}, ` +
      `provider refunds ${report.provider_refunds}; the run took ${report.elapsed_s} s`,
    '',
  );
  return lines.join('\n');
}

main().catch((error: unknown) => {
  process.stderr.write(`bench failed: ${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(1);
});
