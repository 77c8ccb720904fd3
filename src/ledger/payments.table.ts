import { type RecordOf, col, defineTable } from '../database/table';
import type { OperationStatus, RowRef } from './operation';

/** Where a payment stands: succeeded and failed are final; the other two are undecided. */
export type PaymentStatus = OperationStatus;

export const paymentsTable = defineTable('payments', {
  id: col.text('id'),
  clientId: col.uuid('client_id'),
  amount: col.integer('amount'),
  currency: col.char('currency'),
  paymentMethod: col.text('payment_method'),
  orderId: col.text('order_id').orNull(),
  description: col.text('description').orNull(),
  metadata: col.jsonb<Record<string, string>>('metadata'),
  status: col.text<PaymentStatus>('status'),
  providerKey: col.text('provider_key'),
  providerChargeId: col.text('provider_charge_id').orNull(),
  failureCode: col.text('failure_code').orNull(),
  failureMessage: col.text('failure_message').orNull(),
  reconcileAttempts: col.integer('reconcile_attempts'),
  /** 'infinity' once a review's re-checks have ended: node-postgres reads that as the number Infinity. */
  nextReconcileAt: col.timestamptz('next_reconcile_at'),
  /** Who resolved a review, and why: both set by payment:resolve, or neither. */
  resolvedBy: col.text('resolved_by').orNull(),
  resolutionReason: col.text('resolution_reason').orNull(),
  /** The version of the provider's charge last applied from a provider event (0: none yet). */
  providerVersion: col.integer('provider_version'),
  /** The sum of its refunds that are not failed: what is no longer left to refund. */
  amountReserved: col.integer('amount_reserved'),
  /** The sum of its refunds that succeeded. */
  amountRefunded: col.integer('amount_refunded'),
  /**
   * The W3C traceparent of the request that created it, when traces are on:
   * the reconcile that finishes it joins that trace (docs/operations.md#traces).
   */
  traceParent: col.text('trace_parent').orNull(),
  createdAt: col.timestamptz('created_at'),
  updatedAt: col.timestamptz('updated_at'),
});

/** A row of the payments table. */
export type Payment = RecordOf<typeof paymentsTable>;

/** Name of the partial unique index behind `order_already_paid`. */
export const ACTIVE_ORDER_INDEX = 'payments_client_order_active_key';

/** What names one payment (see RowRef). */
export type PaymentRef = RowRef;
