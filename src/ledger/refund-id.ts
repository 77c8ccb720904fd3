import { newUlid } from '../common/ulid';

/** `re_` and a ULID: what newRefundId makes, and all a refund id can be. */
export const REFUND_ID_PATTERN = /^re_[0-9A-HJKMNP-TV-Z]{26}$/;

export function newRefundId(): string {
  return `re_${newUlid()}`;
}

/**
 * The provider's idempotency key for a refund, derived from the refund id and
 * nothing else (as a payment's is from its id): every call for one refund
 * presents the same key, so the provider refunds at most once per refund.
 */
export function providerRefundKeyFor(refundId: string): string {
  return `rk_${refundId}`;
}
