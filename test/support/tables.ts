import { apiKeysTable } from '../../src/clients/api-keys.table';
import { apiClientsTable } from '../../src/clients/clients.table';
import { idempotencyKeysTable } from '../../src/ledger/idempotency-keys.table';
import { eventsTable } from '../../src/ledger/events.table';
import { webhookDeliveriesTable } from '../../src/merchant-events/webhook-deliveries.table';
import { webhookEndpointsTable } from '../../src/merchant-events/webhook-endpoints.table';
import { paymentsTable } from '../../src/ledger/payments.table';
import { refundsTable } from '../../src/ledger/refunds.table';
import { processedMessagesTable } from '../../src/provider-events/processed-messages.table';
import type { Column, Table } from '../../src/database/table';

/** Every table the migrations create, each declared once beside its feature. */
export const TABLES: readonly Table<Record<string, Column<unknown>>>[] = [
  apiClientsTable,
  apiKeysTable,
  paymentsTable,
  refundsTable,
  idempotencyKeysTable,
  processedMessagesTable,
  eventsTable,
  webhookEndpointsTable,
  webhookDeliveriesTable,
];
