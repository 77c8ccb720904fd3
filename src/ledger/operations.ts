import type { Operation } from './operation';
import { finalResponseFor } from './payment-outcome';
import { toResource } from './payment-resource';
import { type Payment, paymentsTable } from './payments.table';
import { finalRefundResponseFor } from './refund-outcome';
import { toRefundResource } from './refund-resource';
import { type Refund, refundsTable } from './refunds.table';

/** Payments: a charge of the client's customer. */
export const PAYMENTS: Operation<Payment> = {
  name: 'payment',
  table: paymentsTable,
  keyColumn: 'payment_id',
  providerIdColumn: 'provider_charge_id',
  providerIdProperty: 'providerChargeId',
  resource: toResource,
  finalResponse: finalResponseFor,
  movedEffects: () => [],
};

/**
 * Refunds: money given back on a succeeded payment. A refund's move writes
 * its payment's sums in the same statement: a success adds to
 * amount_refunded, a failure gives its amount back to what is left to refund
 * (amount_reserved, raised when the refund was claimed). A review changes
 * neither: the amount stays reserved until the refund is final. The
 * payment is found by the id the moved refund names, as a value (a scalar
 * subquery) rather than a join, so that even a plan made once, on a small
 * table, looks it up by its key instead of reading the payments.
 */
export const REFUNDS: Operation<Refund> = {
  name: 'refund',
  table: refundsTable,
  keyColumn: 'refund_id',
  providerIdColumn: 'provider_refund_id',
  providerIdProperty: 'providerRefundId',
  resource: toRefundResource,
  finalResponse: finalRefundResponseFor,
  movedEffects: (client) => [
    `refunded AS (
       UPDATE payments
          SET amount_refunded = amount_refunded + CASE WHEN moved.status = 'succeeded' THEN moved.amount ELSE 0 END,
              amount_reserved = amount_reserved - CASE WHEN moved.status = 'failed' THEN moved.amount ELSE 0 END,
              updated_at = CASE WHEN moved.status = 'succeeded' THEN now() ELSE payments.updated_at END
         FROM moved
        WHERE payments.client_id = ${client} AND payments.id = (SELECT "paymentId" FROM moved)
          AND moved.status IN ('succeeded', 'failed')
     )`,
  ],
};
