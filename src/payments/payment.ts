import { ulid } from 'ulid';
import type { ChargeInput } from '../provider/provider.client';
import type { Payment } from './payments.table';

export type PaymentStatus = 'pending' | 'succeeded' | 'failed' | 'requires_review';

/** The payment object of the public API, in the field order the README documents. */
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

/** `pay_` and a ULID (Crockford base32): what newPaymentId makes, and all a payment id can be. */
export const PAYMENT_ID_PATTERN = /^pay_[0-9A-HJKMNP-TV-Z]{26}$/;

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

/** What the provider is asked to charge for a payment, by the request and the worker alike. */
export function chargeInputFor(payment: Payment): ChargeInput {
  return {
    providerKey: payment.providerKey,
    amount: payment.amount,
    currency: payment.currency,
    paymentMethod: payment.paymentMethod,
    reference: payment.id,
  };
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

