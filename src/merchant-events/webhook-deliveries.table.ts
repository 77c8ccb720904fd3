import { type RecordOf, col, defineTable } from '../database/table';

export type DeliveryStatus = 'pending' | 'delivered' | 'failed';

export const webhookDeliveriesTable = defineTable('webhook_deliveries', {
  eventId: col.text('event_id'),
  endpointId: col.text('endpoint_id'),
  clientId: col.uuid('client_id'),
  status: col.text<DeliveryStatus>('status'),
  /** Sends whose result was recorded; a send cut short by a crash is not counted. */
  attempts: col.integer('attempts'),
  nextAttemptAt: col.timestamptz('next_attempt_at'),
  /** Set while a worker holds the delivery: only the holder of this token records its result. */
  claimToken: col.uuid('claim_token').orNull(),
  claimedUntil: col.timestamptz('claimed_until').orNull(),
  lastError: col.text('last_error').orNull(),
  deliveredAt: col.timestamptz('delivered_at').orNull(),
  /** When the event committed: the retry horizon counts from here. */
  createdAt: col.timestamptz('created_at'),
});

/** One event on its way to one endpoint. */
export type WebhookDelivery = RecordOf<typeof webhookDeliveriesTable>;
