import 'reflect-metadata';
import { loadavg } from 'node:os';
import { setTimeout as delay } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { Logger } from '@nestjs/common';
import { Pool } from 'pg';
import type { DataSource } from 'typeorm';
import { ClientsRepository } from '../src/clients/clients.repository';
import { loadConfig, loadConfigOrExit } from '../src/config/app-config';
import { firstEventIdAt, newEventId } from '../src/ledger/outbox';
import { newPaymentId } from '../src/ledger/payment-id';
import { EventsRepository } from '../src/merchant-events/events.repository';
import { Metrics } from '../src/metrics/metrics';
import { ProcessedMessagesRepository } from '../src/provider-events/processed-messages.repository';
import { RetentionService } from '../src/retention/retention.service';
import { keepStatisticsCurrent } from './bench/analyzer';
import { round } from './bench/measure';
import { benchDatabase, integerIn } from './bench/options';
import { createClient } from '../test/support/test-env';
import { databaseUrlNamed, dropDatabase, openScratchDatabase } from '../test/support/scratch-database';

const USAGE = `usage: npm run bench:retention -- [--rate N] [--seconds S] [--backlog N] [--json]

Whether the worker's retention prune keeps up with far more events than the
API makes, without holding up the writes. On a database of its own (created,
emptied, dropped at the end) on the loopback server of DATABASE_URL:

1. seeds --backlog events made a day ago, each with a delivered webhook
   delivery, a payment, and a processed provider message as old;
2. writer alone, --writer-seconds after a second of warm-up: --connections connections insert events at
   --rate a second in all, each statement --batch payments with their events,
   deliveries (1 in 100 left pending, which must be kept) and processed
   messages, as the outcome statements and provider events write them;
3. writer and prune, --seconds: the same writes while RetentionService (the
   worker's own code) runs every --interval-ms with --retention-seconds as
   both retentions, draining the seeded backlog and then keeping up.

Prints, per second, the events and messages past the retention still to
prune, and the events written and pruned; then how long the seeded backlog
took and the events pruned a second meanwhile (the prune's capacity), the
largest backlog once drained (what keeping up leaves behind), and the
writer's statement latency (p50, p99, max) alone, beside the prune, and
beside it once the seeded backlog is gone.

  --rate N               events written a second, 100 to 50000 (default 2500)
  --batch N              events per writer statement, 1 to 100 (default 20)
  --connections N        writer connections, 1 to 32 (default 6)
  --backlog N            old events seeded, 0 to 1000000 (default 60000)
  --writer-seconds S     writer alone, after a second of warm-up, 1 to 60 (default 6)
  --seconds S            writer and prune, 5 to 120 (default 20)
  --retention-seconds S  both retentions, 1 to 600 (default 5)
  --interval-ms N        between prune runs, as RETENTION_PRUNE_INTERVAL_MS (default 1000)
  --database NAME        its database; must contain "bench" (default payments_bench_retention)
  --json                 one JSON object instead of the lines

The defaults take about 45 s. Exits 1 when an event with a pending delivery
was pruned or the prune did not drain the seeded backlog.
`;

const CONSUMER = 'provider';
/** One delivery in this many is left pending: its event must outlive the retention. */
const PENDING_EVERY = 100;
const CLIENTS = 20;

interface Options {
  rate: number;
  batch: number;
  connections: number;
  backlog: number;
  writerSeconds: number;
  seconds: number;
  retentionSeconds: number;
  intervalMs: number;
  database: string;
  json: boolean;
}

function parseOptions(): Options | undefined {
  const { values } = parseArgs({
    options: {
      rate: { type: 'string', default: '2500' },
      batch: { type: 'string', default: '20' },
      connections: { type: 'string', default: '6' },
      backlog: { type: 'string', default: '60000' },
      'writer-seconds': { type: 'string', default: '6' },
      seconds: { type: 'string', default: '20' },
      'retention-seconds': { type: 'string', default: '5' },
      'interval-ms': { type: 'string', default: '1000' },
      database: { type: 'string', default: 'payments_bench_retention' },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) return undefined;
  return {
    rate: integerIn('rate', values.rate, 100, 50_000),
    batch: integerIn('batch', values.batch, 1, 100),
    connections: integerIn('connections', values.connections, 1, 32),
    backlog: integerIn('backlog', values.backlog, 0, 1_000_000),
    writerSeconds: integerIn('writer-seconds', values['writer-seconds'], 1, 60),
    seconds: integerIn('seconds', values.seconds, 5, 120),
    retentionSeconds: integerIn('retention-seconds', values['retention-seconds'], 1, 600),
    intervalMs: integerIn('interval-ms', values['interval-ms'], 50, 60_000),
    database: benchDatabase(values.database),
    json: values.json,
  };
}

/** Writer statement latencies, in ms. */
interface Latency {
  statements: number;
  p50_ms: number;
  p99_ms: number;
  max_ms: number;
}

function latencyOf(samples: number[]): Latency {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q: number) => round(sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0);
  return { statements: sorted.length, p50_ms: at(0.5), p99_ms: at(0.99), max_ms: round(sorted.at(-1) ?? 0) };
}

/**
 * The writes of `batch` decided payments in one statement: the payments, one
 * event each with its delivery (delivered, but one in PENDING_EVERY), and one
 * processed provider message each.
 */
const WRITE = `
  WITH payment AS (
    INSERT INTO payments (id, client_id, amount, currency, payment_method, provider_key, status)
    SELECT id, $1, 100, 'USD', 'pm_card_ok', 'pk_' || id, 'succeeded' FROM unnest($2::text[]) id
  ), event AS (
    INSERT INTO events (id, client_id, type, payment_id, data)
    SELECT event_id, $1, 'payment.succeeded', payment_id, '{"object":{}}' FROM unnest($3::text[], $2::text[]) u (event_id, payment_id)
    RETURNING id
  ), delivery AS (
    INSERT INTO webhook_deliveries (event_id, endpoint_id, client_id, status, delivered_at)
    SELECT event.id, $4, $1, CASE WHEN event.id = ANY ($5::text[]) THEN 'pending' ELSE 'delivered' END,
           CASE WHEN event.id = ANY ($5::text[]) THEN NULL ELSE now() END
      FROM event
  )
  INSERT INTO processed_messages (client_id, consumer, message_id) SELECT $1, '${CONSUMER}', 'msg_' || id FROM unnest($3::text[]) id`;

interface Writer {
  written: () => number;
  pending: () => number;
  take: () => number[];
  stop: () => Promise<void>;
}

/** `connections` loops, each writing batches at its share of `rate`, every statement's latency kept. */
function startWriter(pool: Pool, clients: { id: string; endpointId: string }[], options: Options): Writer {
  let running = true;
  let written = 0;
  let pending = 0;
  let latencies: number[] = [];
  const periodMs = (options.batch * options.connections * 1000) / options.rate;
  const loop = async (lane: number) => {
    let next = performance.now() + (periodMs * lane) / options.connections;
    for (let n = lane; running; n += options.connections) {
      const wait = next - performance.now();
      if (wait > 0) await delay(wait);
      next += periodMs;
      const client = clients[n % clients.length];
      const paymentIds = Array.from({ length: options.batch }, () => newPaymentId());
      const eventIds = paymentIds.map(() => newEventId());
      const pendingIds = eventIds.filter((_, i) => (written + i) % PENDING_EVERY === 0);
      const started = performance.now();
      await pool.query(WRITE, [client.id, paymentIds, eventIds, client.endpointId, pendingIds]);
      latencies.push(performance.now() - started);
      written += options.batch;
      pending += pendingIds.length;
    }
  };
  const lanes = Array.from({ length: options.connections }, (_, lane) => loop(lane));
  return {
    written: () => written,
    pending: () => pending,
    take: () => {
      const taken = latencies;
      latencies = [];
      return taken;
    },
    stop: async () => {
      running = false;
      await Promise.all(lanes);
    },
  };
}

/** Seeds `count` events made a day ago, spread over the clients, each with a delivered delivery, its payment and an old message. */
async function seedBacklog(dataSource: DataSource, clients: { id: string; endpointId: string }[], count: number): Promise<void> {
  const dayAgo = firstEventIdAt(Date.now() - 86_400_000).slice(0, 'evt_'.length + 10);
  const perClient = Math.ceil(count / clients.length);
  for (const [index, client] of clients.entries()) {
    const rows = Math.min(perClient, count - index * perClient);
    if (rows <= 0) break;
    await dataSource.query(
      `WITH payment AS (
         INSERT INTO payments (id, client_id, amount, currency, payment_method, provider_key, status)
         SELECT 'pay_seed_' || $4 || '_' || g, $1, 100, 'USD', 'pm_card_ok', 'pk_seed_' || $4 || '_' || g, 'succeeded'
           FROM generate_series(1, $3) g
       ), event AS (
         INSERT INTO events (id, client_id, type, payment_id, data, created_at)
         SELECT $5 || lpad(g::text, 16, '0'), $1, 'payment.succeeded', 'pay_seed_' || $4 || '_' || g, '{"object":{}}',
                now() - interval '1 day'
           FROM generate_series(1, $3) g
         RETURNING id
       ), delivery AS (
         INSERT INTO webhook_deliveries (event_id, endpoint_id, client_id, status, delivered_at, created_at)
         SELECT id, $2, $1, 'delivered', now() - interval '1 day', now() - interval '1 day' FROM event
       )
       INSERT INTO processed_messages (client_id, consumer, message_id, processed_at)
       SELECT $1, '${CONSUMER}', 'msg_seed_' || $4 || '_' || g, now() - interval '1 day' FROM generate_series(1, $3) g`,
      [client.id, client.endpointId, rows, index, dayAgo],
    );
  }
}

interface Second {
  t: number;
  /** Events past the retention, not held by a pending delivery: what the prune has yet to do. */
  backlog: number;
  /** Processed messages past the retention. */
  messages_backlog: number;
  events_written_per_s: number;
  /** Written less what the events table grew by: rows pruned, give or take a statement in flight at either end. */
  events_pruned_per_s: number;
  writer_p99_ms: number;
}

async function main(): Promise<void> {
  const options = parseOptions();
  if (!options) {
    process.stdout.write(USAGE);
    return;
  }
  const base = loadConfigOrExit();
  // The service logs each run as the worker does; the bench prints its own lines.
  Logger.overrideLogger(false);
  const { hostname } = new URL(base.databaseUrl);
  if (!['127.0.0.1', 'localhost', '[::1]'].includes(hostname)) {
    throw new Error(`the bench runs against a loopback server only; DATABASE_URL names ${hostname}`);
  }
  const databaseUrl = databaseUrlNamed(base.databaseUrl, options.database);
  const loadAtStart = loadavg().map((value) => round(value));
  const retentionDays = String(options.retentionSeconds / 86_400);
  const config = loadConfig({
    DATABASE_URL: databaseUrl,
    EVENTS_RETENTION_DAYS: retentionDays,
    PROCESSED_MESSAGES_RETENTION_DAYS: retentionDays,
  });
  const dataSource = await openScratchDatabase(databaseUrl);
  const pool = new Pool({ connectionString: databaseUrl, max: options.connections, application_name: 'bench writer' });
  const analyzer = await keepStatisticsCurrent(databaseUrl, true);
  try {
    const clients = [];
    for (let i = 0; i < CLIENTS; i++) {
      const { id } = await createClient(dataSource, `retention bench ${i}`, { webhookUrl: 'http://127.0.0.1:9/hooks' });
      const [{ endpointId }] = (await dataSource.query(`SELECT id AS "endpointId" FROM webhook_endpoints WHERE client_id = $1`, [id])) as {
        endpointId: string;
      }[];
      clients.push({ id, endpointId });
    }
    const seedStarted = performance.now();
    await seedBacklog(dataSource, clients, options.backlog);
    await dataSource.query('ANALYZE');
    const seedSeconds = (performance.now() - seedStarted) / 1000;
    log(options, `seeded ${options.backlog} events a day old in ${round(seedSeconds, 1)} s`);

    const count = async (sql: string, params: unknown[] = []) => ((await pool.query<{ n: number }>(sql, params)).rows[0]?.n ?? 0);
    const backlogNow = () =>
      count(
        `SELECT count(*)::int AS n FROM events e WHERE id < $1
            AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.client_id = e.client_id AND d.event_id = e.id AND d.status = 'pending')`,
        [firstEventIdAt(Date.now() - options.retentionSeconds * 1000)],
      );
    const messagesBacklogNow = () =>
      count(`SELECT count(*)::int AS n FROM processed_messages WHERE processed_at < now() - $1 * interval '1 second'`, [
        options.retentionSeconds,
      ]);
    const eventsNow = () => count(`SELECT count(*)::int AS n FROM events`);

    const writer = startWriter(pool, clients, options);
    /** Samples every second for `total` s: the backlogs, and what was written and pruned in that second. */
    const sample = async (
      phase: string,
      total: number,
      pruning: boolean,
    ): Promise<{ seconds: Second[]; latencies: number[][]; eventsPerS: number }> => {
      const started = performance.now();
      const writtenAtStart = writer.written();
      let writtenBefore = writtenAtStart;
      let eventsBefore = await eventsNow();
      const perSecond: Second[] = [];
      /** Each second's statement latencies. */
      const latencies: number[][] = [];
      for (let t = 1; t <= total; t++) {
        await delay(started + t * 1000 - performance.now());
        const taken = writer.take();
        latencies.push(taken);
        const [backlog, messagesBacklog, events] = await Promise.all([backlogNow(), messagesBacklogNow(), eventsNow()]);
        const written = writer.written();
        const second: Second = {
          t,
          backlog,
          messages_backlog: messagesBacklog,
          events_written_per_s: written - writtenBefore,
          events_pruned_per_s: written - writtenBefore - (events - eventsBefore),
          writer_p99_ms: latencyOf(taken).p99_ms,
        };
        perSecond.push(second);
        log(
          options,
          `${phase} t=${String(t).padStart(3)} s  past retention: ${String(backlog).padStart(7)} events, ${String(messagesBacklog).padStart(7)} messages` +
            `  written ${second.events_written_per_s}/s` +
            (pruning ? `  pruned ${second.events_pruned_per_s}/s` : '') +
            `  writer p99 ${second.writer_p99_ms} ms`,
        );
        writtenBefore = written;
        eventsBefore = events;
      }
      return { seconds: perSecond, latencies, eventsPerS: (writer.written() - writtenAtStart) / ((performance.now() - started) / 1000) };
    };

    // Its connections made and its statements planned before anything is measured.
    await delay(1_000);
    writer.take();
    const aloneRun = await sample('writer alone     ', options.writerSeconds, false);
    const alone = latencyOf(aloneRun.latencies.flat());

    const retention = new RetentionService(
      dataSource,
      new ClientsRepository(dataSource),
      new EventsRepository(),
      new ProcessedMessagesRepository(),
      config,
      new Metrics(),
    );
    const pruned = { events: 0, deliveries: 0, processedMessages: 0, runs: 0 };
    let pruning = true;
    const pruneStarted = performance.now();
    const pruneLoop = (async () => {
      while (pruning) {
        const started = performance.now();
        const run = await retention.pruneExpired();
        pruned.events += run.events;
        pruned.deliveries += run.deliveries;
        pruned.processedMessages += run.processedMessages;
        pruned.runs++;
        const wait = options.intervalMs - (performance.now() - started);
        if (wait > 0 && pruning) await delay(wait);
      }
    })();
    const bothRun = await sample('writer and prune ', options.seconds, true);
    const beside = latencyOf(bothRun.latencies.flat());
    const pruneSeconds = (performance.now() - pruneStarted) / 1000;
    await writer.stop();
    pruning = false;
    await pruneLoop;
    // Drained: the backlog is down to what one interval and one second of sampling let through.
    const steadyBacklog = options.rate * ((options.intervalMs + 1_000) / 1000);
    const drained = bothRun.seconds.find((second) => second.backlog <= steadyBacklog);
    const afterDrain = drained === undefined ? [] : bothRun.seconds.slice(drained.t);
    const besideOnceDrained = drained === undefined ? undefined : latencyOf(bothRun.latencies.slice(drained.t).flat());

    // Every event left past the retention must be one whose delivery is pending.
    const cutoff = firstEventIdAt(Date.now() - options.retentionSeconds * 1000);
    const pendingKept = await count(
      `SELECT count(*)::int AS n FROM events e WHERE id < $1
          AND EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.client_id = e.client_id AND d.event_id = e.id AND d.status = 'pending')`,
      [cutoff],
    );
    const pendingInDatabase = await count(`SELECT count(*)::int AS n FROM webhook_deliveries WHERE status = 'pending'`);
    const report = {
      database: options.database,
      rate_target: options.rate,
      retention_seconds: options.retentionSeconds,
      prune_interval_ms: options.intervalMs,
      seeded_backlog: options.backlog,
      writer_alone: { events_per_s: Math.round(aloneRun.eventsPerS), ...alone },
      writer_beside_prune: { events_per_s: Math.round(bothRun.eventsPerS), ...beside },
      p99_beside_over_alone: round(beside.p99_ms / alone.p99_ms),
      /** The writer beside a prune that only keeps up, the seeded backlog gone. */
      writer_beside_prune_once_drained: besideOnceDrained ?? null,
      pruned: { ...pruned, events_per_s: Math.round(pruned.events / pruneSeconds) },
      seeded_backlog_drained_after_s: drained?.t ?? null,
      /** What the prune does while it has work: events pruned a second until the seeded backlog was gone. */
      drain_events_per_s:
        drained === undefined
          ? null
          : Math.round(bothRun.seconds.slice(0, drained.t).reduce((sum, second) => sum + second.events_pruned_per_s, 0) / drained.t),
      largest_backlog_once_drained: afterDrain.length === 0 ? null : Math.max(...afterDrain.map((s) => s.backlog)),
      largest_messages_backlog_once_drained: afterDrain.length === 0 ? null : Math.max(...afterDrain.map((s) => s.messages_backlog)),
      pending_deliveries_written: writer.pending(),
      pending_deliveries_left: pendingInDatabase,
      pending_events_kept_past_retention: pendingKept,
      seconds: [...aloneRun.seconds.map((second) => ({ phase: 'writer alone', ...second })), ...bothRun.seconds.map((second) => ({ phase: 'writer and prune', ...second }))],
      load_average_at_start: loadAtStart,
      load_average_at_end: loadavg().map((value) => round(value)),
    };
    if (options.json) process.stdout.write(`${JSON.stringify(report)}\n`);
    else {
      const { seconds: _perSecond, ...summary } = report;
      process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
    }
    if (drained === undefined || pendingInDatabase !== writer.pending()) process.exitCode = 1;
  } finally {
    await analyzer.stop();
    await pool.end();
    await dataSource.destroy();
    await dropDatabase(base.databaseUrl, options.database);
  }
}

function log(options: Options, line: string): void {
  if (!options.json) process.stdout.write(`${line}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`bench:retention failed: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
