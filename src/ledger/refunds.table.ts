import { type RecordOf, col, defineTable } from '../database/table';
import type { OperationStatus } from './operation';

export const refundsTable = defineTable('refunds', {
  id: col.text('id'),
  clientId: col.uuid('client_id'),
  paymentId: col.text('payment_id'),
  amount: col.integer('amount'),
  currency: col.char('currency'),
  reason: col.text<RefundReason>('reason').orNull(),
  metadata: col.jsonb<Record<string, string>>('metadata'),
  status: col.text<OperationStatus>('status'),
  providerKey: col.text('provider_key'),
  /** The payment's charge, which the provider refunds: final once the payment succeeded. */
  providerChargeId: col.text('provider_charge_id'),
  providerRefundId: col.text('provider_refund_id').orNull(),
  failureCode: col.text('failure_code').orNull(),
  failureMessage: col.text('failure_message').orNull(),
  reconcileAttempts: col.integer('reconcile_attempts'),
  nextReconcileAt: col.timestamptz('next_reconcile_at'),
  resolvedBy: col.text('resolved_by').orNull(),
  resolutionReason: col.text('resolution_reason').orNull(),
  providerVersion: col.integer('provider_version'),
  /**
   * The W3C traceparent of the request that created it, when traces are on:
   * the reconcile that finishes it joins that trace (docs/operations.md#traces).
   */
  traceParent: col.text('trace_parent').orNull(),
  createdAt: col.timestamptz('created_at'),
  updatedAt: col.timestamptz('updated_at'),
});

/** Why a refund was asked for: the three reasons the API takes. */
export const REFUND_REASONS = ['duplicate', 'fraudulent', 'requested_by_customer'] as const;
export type RefundReason = (typeof REFUND_REASONS)[number];

/** A row of the refunds table. */
export type Refund = RecordOf<typeof refundsTable>;
