import { type RecordOf, col, defineTable } from '../database/table';
import type { PaymentResource } from './payment-resource';
import type { RefundResource } from './refund-resource';
import type { EventType } from './outbox';

export const eventsTable = defineTable('events', {
  id: col.text('id'),
  clientId: col.uuid('client_id'),
  type: col.text<EventType>('type'),
  /** The row the event announces a change of: a payment or a refund, exactly one of the two. */
  paymentId: col.text('payment_id').orNull(),
  refundId: col.text('refund_id').orNull(),
  /** The row as it was right after the change, in the API's own shape and field order. */
  data: col.json<{ object: PaymentResource | RefundResource }>('data'),
  createdAt: col.timestamptz('created_at'),
  /** The transaction that wrote the event: the list's order (see EventsRepository.listForClient). */
  xactId: col.xid8('xact_id'),
});

/** A row of the events table: one status change of one payment or refund. */
export type EventRecord = RecordOf<typeof eventsTable>;
