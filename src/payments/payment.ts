import { ulid } from 'ulid';

export type PaymentStatus = 'pending' | 'succeeded' | 'failed' | 'requires_review';

/** A row of the payments table, as the repository returns it. */
export interface Payment {
  id: string;
  clientId: string;
  amount: number;
  currency: string;
  paymentMethod: string;
  orderId: string | null;
  description: string | null;
  metadata: Record<string, string>;
  status: PaymentStatus;
  providerKey: string;
  providerChargeId: string | null;
  failureCode: string | null;
  failureMessage: string | null;
  reconcileAttempts: number;
  createdAt: Date;
  updatedAt: Date;
}

/** The payment object of the public API (see CONTRACT.md), in its field order. */
export interface PaymentResource {
  id: string;
  object: 'payment';
  amount: number;
  currency: string;
  status: PaymentStatus;
  payment_method: string;
  order_id: string | null;
  description: string | null;
  metadata: Record<string, string>;
  provider_charge_id: string | null;
  failure_code: string | null;
  failure_message: string | null;
  created_at: string;
  updated_at: string;
}

/** ULIDs sort by creation time, which keeps the newest-first list index-friendly. */
export function newPaymentId(): string {
  return `pay_${ulid()}`;
}

/**
 * The provider's idempotency key for a payment. Derived from the payment id and
 * nothing else, so every call for one payment (a retry in the request, a
 * resumed request, the reconciliation worker) presents the same key and the
 * provider charges at most once.
 */
export function providerKeyFor(paymentId: string): string {
  return `pk_${paymentId}`;
}

export function toResource(payment: Payment): PaymentResource {
  return {
    id: payment.id,
    object: 'payment',
    amount: payment.amount,
    currency: payment.currency,
    status: payment.status,
    payment_method: payment.paymentMethod,
    order_id: payment.orderId,
    description: payment.description,
    metadata: payment.metadata,
    provider_charge_id: payment.providerChargeId,
    failure_code: payment.failureCode,
    failure_message: payment.failureMessage,
    created_at: payment.createdAt.toISOString(),
    updated_at: payment.updatedAt.toISOString(),
  };
}

