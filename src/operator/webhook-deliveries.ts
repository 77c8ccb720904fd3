import 'reflect-metadata';
import { parseArgs } from 'node:util';
import { loadConfigOrExit } from '../config/app-config';
import { createDataSource } from '../database/data-source';
import { WebhookDeliveriesRepository } from '../merchant-events/webhook-deliveries.repository';
import type { DeliveryStatus } from '../merchant-events/webhook-deliveries.table';

const USAGE =
  'usage: npm run webhook:deliveries -- [--client ID] [--event evt_...] [--status pending|delivered|failed] [--limit N]\n';

const STATUSES: readonly DeliveryStatus[] = ['pending', 'delivered', 'failed'];
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * `npm run webhook:deliveries -- [filters]`: what the worker did with each
 * event, newest first, one JSON line per delivery (status, attempts, last
 * error, next attempt, delivered at). Read-only; exit 2 on bad arguments.
 */
async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      client: { type: 'string' },
      event: { type: 'string' },
      status: { type: 'string' },
      limit: { type: 'string', default: '50' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    process.stdout.write(USAGE);
    return;
  }
  const status = values.status as DeliveryStatus | undefined;
  const limit = /^[0-9]{1,4}$/.test(values.limit) ? Number(values.limit) : 0;
  if ((status !== undefined && !STATUSES.includes(status)) || (values.client !== undefined && !UUID.test(values.client)) || limit < 1) {
    process.stderr.write(USAGE);
    process.exit(2);
  }
  const dataSource = await createDataSource(loadConfigOrExit()).initialize();
  try {
    const rows = await new WebhookDeliveriesRepository().list(dataSource.manager, {
      clientId: values.client,
      eventId: values.event,
      status,
      limit,
    });
    for (const { claimToken: _token, ...row } of rows) {
      process.stdout.write(`${JSON.stringify({ ...row, inFlight: row.claimedUntil !== null && row.claimedUntil > new Date() })}\n`);
    }
  } finally {
    await dataSource.destroy();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`webhook:deliveries failed: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
