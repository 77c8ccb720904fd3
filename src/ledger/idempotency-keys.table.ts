import { type RecordOf, col, defineTable } from '../database/table';

export const idempotencyKeysTable = defineTable('idempotency_keys', {
  clientId: col.uuid('client_id'),
  key: col.varchar('key'),
  fingerprint: col.char('fingerprint'),
  /** The row the key was claimed for: a payment or a refund, exactly one of the two. */
  paymentId: col.text('payment_id').orNull(),
  refundId: col.text('refund_id').orNull(),
  leaseToken: col.uuid('lease_token').orNull(),
  leasedUntil: col.timestamptz('leased_until').orNull(),
  responseStatus: col.smallint('response_status').orNull(),
  responseBody: col.text('response_body').orNull(),
  createdAt: col.timestamptz('created_at'),
  completedAt: col.timestamptz('completed_at').orNull(),
  expiresAt: col.timestamptz('expires_at').orNull(),
});

/** A row of the idempotency_keys table. */
export type IdempotencyKeyRecord = RecordOf<typeof idempotencyKeysTable>;
