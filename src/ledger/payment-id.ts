import { newUlid } from '../common/ulid';

/** `pay_` and a ULID (Crockford base32): what newPaymentId makes, and all a payment id can be. */
export const PAYMENT_ID_PATTERN = /^pay_[0-9A-HJKMNP-TV-Z]{26}$/;

/** ULIDs sort by creation time, which keeps the newest-first list index-friendly. */
export function newPaymentId(): string {
  return `pay_${newUlid()}`;
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
