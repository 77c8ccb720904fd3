import 'reflect-metadata';
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import type { DataSource } from 'typeorm';
import { ClientsRepository } from '../src/clients/clients.repository';
import { ClientsService } from '../src/clients/clients.service';
import { loadConfigOrExit } from '../src/config/app-config';
import { freePort } from '../test/support/private-redis';
import { databaseUrlNamed, emptyTables, openScratchDatabase, waitUntilNonePending } from '../test/support/scratch-database';
import { dropWorkerQueues } from '../test/support/worker-queues';
import { type ApiProcess, type ProviderProcess, type WorkerProcess, startApiProcess, startProvider, startWorkerProcess } from '../test/support/processes';

/**
 * `npm run settle-latency -- [--payments 5] [--settle-ms 3000]`: how long a
 * payment the provider settles later stays pending with us, with provider
 * events on and off. The API, the worker (with its production reconciliation
 * defaults) and the mock provider run as real processes; each payment is a
 * `pm_card_pending` charge that the provider settles --settle-ms after
 * creating it, and the figure is the time from that settlement to our
 * `succeeded` (updated_at). Uses its own database (payments_settle_latency)
 * and queue prefix; prints one JSON line.
 */
const DATABASE = 'payments_settle_latency';
/** Production's sweep waits 60 s before it looks at a pending payment; give it room. */
const DEADLINE_MS = 180_000;

const USAGE = `Usage: npm run settle-latency -- [--payments N] [--settle-ms MS]

How long a payment the provider settles later stays pending with us, with
provider events on and off; API, worker and provider as real processes on a
database of its own (${DATABASE}). One JSON line.
  --payments N    pm_card_pending payments per run, 1 to 100 (default 5)
  --settle-ms MS  how long the provider keeps them pending (default 3000)
`;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      payments: { type: 'string', default: '5' },
      'settle-ms': { type: 'string', default: '3000' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    process.stdout.write(USAGE);
    return;
  }
  const payments = Number(values.payments);
  const settleMs = Number(values['settle-ms']);
  if (!(Number.isInteger(payments) && payments >= 1 && payments <= 100) || !(Number.isInteger(settleMs) && settleMs >= 0)) {
    throw new Error('--payments must be an integer in [1, 100] and --settle-ms a non-negative integer');
  }
  const base = loadConfigOrExit();
  const databaseUrl = databaseUrlNamed(base.databaseUrl, DATABASE);
  const dataSource = await openScratchDatabase(databaseUrl);
  try {
    const report: Record<string, unknown> = { payments, settle_ms: settleMs };
    for (const events of [true, false]) {
      report[events ? 'events_on' : 'events_off'] = await measure(dataSource, databaseUrl, base.redisUrl, {
        events,
        payments,
        settleMs,
      });
    }
    process.stdout.write(`${JSON.stringify(report)}\n`);
  } finally {
    await dataSource.destroy();
  }
}

async function measure(
  dataSource: DataSource,
  databaseUrl: string,
  redisUrl: string,
  run: { events: boolean; payments: number; settleMs: number },
): Promise<{ median_ms: number; max_ms: number }> {
  await emptyTables(dataSource);
  const client = await new ClientsService(new ClientsRepository(dataSource)).create('settle-latency');
  const env = { LOG_LEVEL: 'warn', DATABASE_URL: databaseUrl, REDIS_URL: redisUrl, QUEUE_PREFIX: `settle-${randomUUID().slice(0, 8)}` };
  const apiPort = await freePort();
  let provider: ProviderProcess | undefined;
  let api: ApiProcess | undefined;
  let worker: WorkerProcess | undefined;
  try {
    provider = await startProvider({
      ...env,
      PROVIDER_PENDING_SETTLE_MS: String(run.settleMs),
      PROVIDER_WEBHOOK_URL: run.events ? `http://127.0.0.1:${apiPort}/v1/provider/events` : '',
    });
    api = await startApiProcess({ ...env, PORT: String(apiPort), PROVIDER_URL: provider.url });
    worker = await startWorkerProcess({ ...env, PROVIDER_URL: provider.url });
    for (let index = 0; index < run.payments; index++) {
      const res = await fetch(`${api.url}/v1/payments`, {
        method: 'POST',
        headers: { authorization: `Bearer ${client.api_key}`, 'content-type': 'application/json', 'idempotency-key': randomUUID() },
        body: JSON.stringify({ amount: 500, currency: 'USD', payment_method: 'pm_card_pending' }),
      });
      if (res.status !== 202) throw new Error(`a pm_card_pending payment answered ${res.status}`);
    }
    const stillPending = await waitUntilNonePending(dataSource, DEADLINE_MS);
    if (stillPending > 0) throw new Error(`${stillPending} payments still pending after ${DEADLINE_MS} ms`);
    const charges = new Map((await provider.charges()).map((charge) => [charge.reference, charge]));
    const rows = (await dataSource.query(`SELECT id, status, updated_at FROM payments`)) as { id: string; status: string; updated_at: Date }[];
    const latencies = rows
      .map((row) => {
        if (row.status !== 'succeeded') throw new Error(`payment ${row.id} ended ${row.status}`);
        const settledAt = Date.parse(charges.get(row.id)!.created_at) + run.settleMs;
        return row.updated_at.getTime() - settledAt;
      })
      .sort((a, b) => a - b);
    return { median_ms: latencies[Math.floor(latencies.length / 2)], max_ms: latencies[latencies.length - 1] };
  } finally {
    await worker?.stop();
    await api?.stop();
    await provider?.stop();
    await dropWorkerQueues(redisUrl, env.QUEUE_PREFIX);
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`settle-latency failed: ${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(1);
});
