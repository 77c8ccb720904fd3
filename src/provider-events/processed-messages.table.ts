import { col, defineTable } from '../database/table';

/** A message a consumer has applied: its effect committed in the same transaction as this row. */
export const processedMessagesTable = defineTable('processed_messages', {
  /** The client of the payment the message applied to: the row lives on that payment's shard. */
  clientId: col.uuid('client_id'),
  consumer: col.text('consumer'),
  messageId: col.text('message_id'),
  processedAt: col.timestamptz('processed_at'),
});
