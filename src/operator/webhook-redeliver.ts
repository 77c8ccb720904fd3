import 'reflect-metadata';
import { parseArgs } from 'node:util';
import { loadConfigOrExit } from '../config/app-config';
import { createDataSource } from '../database/data-source';
import { queryRow } from '../database/sql';
import { EVENT_ID_PATTERN } from '../ledger/outbox';
import { WEBHOOK_ENDPOINT_ID_PATTERN } from '../merchant-events/webhook-endpoint';
import { WebhookDeliveriesRepository } from '../merchant-events/webhook-deliveries.repository';

const USAGE = 'usage: npm run webhook:redeliver -- --event evt_... [--endpoint we_...]\n';

/**
 * `npm run webhook:redeliver -- --event evt_… [--endpoint we_…]`: sends an
 * event again to its endpoints (or to one), whatever became of its earlier
 * deliveries (delivered, failed, pending): each becomes due now and the
 * worker sends it under the same webhook-id, retrying on the usual ladder
 * with its horizon counted from now. Only enabled, live endpoints that the
 * event was delivered to are sent to. Prints one JSON line; exit 1 when
 * nothing could be redelivered, 2 on bad arguments.
 */
async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { event: { type: 'string' }, endpoint: { type: 'string' }, help: { type: 'boolean', default: false } },
  });
  if (values.help) {
    process.stdout.write(USAGE);
    return;
  }
  if (!values.event || !EVENT_ID_PATTERN.test(values.event) || (values.endpoint !== undefined && !WEBHOOK_ENDPOINT_ID_PATTERN.test(values.endpoint))) {
    process.stderr.write(USAGE);
    process.exit(2);
  }
  const dataSource = await createDataSource(loadConfigOrExit()).initialize();
  try {
    // The event's client, so that every statement after runs on its shard: the only one that reads every client.
    const event = await queryRow<{ clientId: string }>(dataSource.manager, `SELECT client_id AS "clientId" FROM events WHERE id = $1`, [values.event]);
    if (!event) return refuse({ event: values.event, error: 'no such event' });
    const redelivered = await new WebhookDeliveriesRepository().redeliver(dataSource.manager, {
      clientId: event.clientId,
      eventId: values.event,
      endpointId: values.endpoint,
    });
    if (redelivered.length === 0) {
      const error = values.endpoint
        ? 'the event has no delivery to that endpoint, or the endpoint is disabled or deleted'
        : 'the event has no delivery to an enabled endpoint';
      return refuse({ event: values.event, endpoint: values.endpoint ?? null, error });
    }
    process.stdout.write(`${JSON.stringify({ msg: 'redelivering', event: values.event, client: event.clientId, deliveries: redelivered })}\n`);
  } finally {
    await dataSource.destroy();
  }
}

function refuse(line: Record<string, unknown>): void {
  process.stderr.write(`${JSON.stringify({ msg: 'nothing redelivered', ...line })}\n`);
  process.exitCode = 1;
}

main().catch((error: unknown) => {
  process.stderr.write(`webhook:redeliver failed: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
