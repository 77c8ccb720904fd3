import { setTimeout as delay } from 'node:timers/promises';
import type autocannon from 'autocannon';
import type { DataSource } from 'typeorm';
import { loadConfig } from '../../src/config/app-config';
import { startWorkerProcess } from '../../test/support/processes';
import { type Figures, type Target, load, round } from './measure';
import { cpuMs } from './process-cpu';

export interface BacklogFigures {
  payments: number;
  drain_s: number;
  payments_per_s: number;
  /** The worker's RECONCILE_CONCURRENCY. */
  concurrency: number;
  left_pending: number;
  /** The worker's user + system CPU over the drain, per payment drained. */
  worker_cpu_ms_per_payment: number;
  create_alone: Figures;
  create_during_drain: Figures;
  /** How much slower creates ran while the worker drained, in per cent of the rate alone. */
  create_slowdown_pct: number;
  /** Whether the drain was still going when the load during it ended, so the whole load overlapped it. */
  load_within_drain: boolean;
  /** The goal, reported rather than enforced: creates at most 20 % slower while the worker drains. */
  slowed_over_20pct: boolean;
  /** Every seeded payment was settled. */
  ok: boolean;
}

/** The goal's pace: 10,000 payments in 60 s. */
const GOAL_MS_PER_PAYMENT = 60_000 / 10_000;

const SEEDED_PENDING = `SELECT count(*)::int AS n FROM payments WHERE client_id = $1 AND status = 'pending'`;

/**
 * `count` pending payments of `clientId` from an hour ago, each with its key
 * released and no answer (what requests that died after their claim leave),
 * paying with pm_card_ok: a worker's sweep takes them all at its first run.
 */
export async function seedStaleBacklog(dataSource: DataSource, clientId: string, count: number): Promise<void> {
  await dataSource.query(
    `INSERT INTO payments (id, client_id, amount, currency, payment_method, provider_key, status, created_at, updated_at)
     SELECT 'pay_backlog_' || g, $1, 500, 'USD', 'pm_card_ok', 'pk_pay_backlog_' || g, 'pending',
            now() - interval '1 hour', now() - interval '1 hour'
       FROM generate_series(1, $2) g`,
    [clientId, count],
  );
  await dataSource.query(
    `INSERT INTO idempotency_keys (client_id, key, fingerprint, payment_id, created_at)
     SELECT $1, 'backlog-' || g, repeat('0', 64), 'pay_backlog_' || g, now() - interval '1 hour'
       FROM generate_series(1, $2) g`,
    [clientId, count],
  );
  await dataSource.query('ANALYZE payments');
  await dataSource.query('ANALYZE idempotency_keys');
}

/**
 * `count` stale pending payments (seedStaleBacklog). One worker (the
 * production knobs, but a stale threshold of a second) drains them while the
 * API takes creates; the creates' rate is measured alone first, on the same
 * database.
 */
export async function drainBacklog(
  dataSource: DataSource,
  options: {
    clientId: string;
    count: number;
    api: Target;
    create: autocannon.Request;
    connections: number;
    seconds: number;
    workerEnv: Record<string, string>;
  },
): Promise<BacklogFigures> {
  const { clientId, count } = options;
  await seedStaleBacklog(dataSource, clientId, count);

  const loadOptions = { connections: options.connections, seconds: options.seconds };
  const createAlone = await load(options.api, options.create, loadOptions);

  const workerEnv = { ...options.workerEnv, RECONCILE_STALE_AFTER_MS: '1000' };
  const { reconcile } = loadConfig({ ...process.env, ...workerEnv });
  // Twice the goal's time (10,000 in 60 s), and a minute for a loaded machine.
  const deadline = Date.now() + 2 * count * GOAL_MS_PER_PAYMENT + 60_000;
  const worker = await startWorkerProcess(workerEnv);
  try {
    const started = performance.now();
    const workerCpuBefore = cpuMs(worker.pid);
    const during = load(options.api, options.create, loadOptions);
    let loadDone = false;
    void during.then(() => (loadDone = true));
    let pending = count;
    while (pending > 0 && Date.now() < deadline) {
      await delay(200);
      [{ n: pending }] = (await dataSource.query(SEEDED_PENDING, [clientId])) as { n: number }[];
    }
    const drainS = (performance.now() - started) / 1000;
    const workerCpu = cpuMs(worker.pid) - workerCpuBefore;
    const loadWithinDrain = loadDone;
    const createDuring = await during;
    const slowdown = createAlone.rps === 0 ? 0 : (100 * (createAlone.rps - createDuring.rps)) / createAlone.rps;
    return {
      payments: count,
      drain_s: round(drainS, 1),
      payments_per_s: round((count - pending) / drainS, 1),
      concurrency: reconcile.concurrency,
      left_pending: pending,
      worker_cpu_ms_per_payment: round(workerCpu / Math.max(1, count - pending), 2),
      create_alone: createAlone,
      create_during_drain: createDuring,
      create_slowdown_pct: round(slowdown, 1),
      load_within_drain: loadWithinDrain,
      slowed_over_20pct: slowdown > 20,
      ok: pending === 0,
    };
  } finally {
    await worker.stop();
  }
}
