import { apiClientsTable } from '../clients/clients.table';
import { idempotencyKeysTable } from '../ledger/idempotency-keys.table';
import { eventsTable } from '../ledger/events.table';
import { webhookDeliveriesTable } from '../merchant-events/webhook-deliveries.table';
import { webhookEndpointsTable } from '../merchant-events/webhook-endpoints.table';
import { paymentsTable } from '../ledger/payments.table';
import { processedMessagesTable } from '../provider-events/processed-messages.table';
import type { Column, Table } from './table';

/** Every table the migrations create, each declared once beside its feature. */
export const TABLES: readonly Table<Record<string, Column<unknown>>>[] = [
  apiClientsTable,
  paymentsTable,
  idempotencyKeysTable,
  processedMessagesTable,
  eventsTable,
  webhookEndpointsTable,
  webhookDeliveriesTable,
];
