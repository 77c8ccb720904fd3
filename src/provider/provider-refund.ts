import { storableWithin } from '../common/unicode';
import { PROVIDER_CHARGE_ID_MAX, PROVIDER_FAILURE_CODE_MAX } from './provider-charge';

/** A refund as the provider reports it (snake_case, as on the wire). */
export interface ProviderRefund {
  id: string;
  status: 'succeeded' | 'failed' | 'pending';
  /** In the charge's minor units; a refund of nothing is not one the provider makes. */
  amount: number;
  /** The provider's id of the charge refunded (ch_…), as ProviderCharge.id holds it. */
  charge: string;
  failure_code: string | null;
}

const STATUSES: readonly string[] = ['succeeded', 'failed', 'pending'] satisfies ProviderRefund['status'][];

/**
 * The longest refund id kept, in code points: the charge id's cap, as the two
 * are ids of one provider and are stored alike. A refund's failure code and
 * the charge id it names are held to the charge's caps for the same reason.
 */
export const PROVIDER_REFUND_ID_MAX = 255;

/**
 * The refund in a provider body, or undefined when the shape is wrong. One
 * reading for every path a refund arrives by (the answer to a refund, a
 * lookup, a provider event), as parseProviderCharge is for charges and just
 * as strict: money goes back on this object, so every field is checked, only
 * the known fields are copied, and every string is one the schema can store as
 * it is (no U+0000, no lone surrogate, within its limit in code points). An
 * answer that fails is unusable, so its outcome stays unknown: it is never
 * read as a refund declined.
 */
export function parseProviderRefund(body: unknown): ProviderRefund | undefined {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return undefined;
  const { id, status, amount, charge, failure_code } = body as Record<string, unknown>;
  if (
    typeof id !== 'string' || !storableWithin(id, 1, PROVIDER_REFUND_ID_MAX) ||
    typeof status !== 'string' || !STATUSES.includes(status) ||
    !Number.isSafeInteger(amount) || (amount as number) < 1 ||
    typeof charge !== 'string' || !storableWithin(charge, 1, PROVIDER_CHARGE_ID_MAX) ||
    (failure_code !== null && (typeof failure_code !== 'string' || !storableWithin(failure_code, 1, PROVIDER_FAILURE_CODE_MAX)))
  ) {
    return undefined;
  }
  return { id, status: status as ProviderRefund['status'], amount: amount as number, charge, failure_code };
}
