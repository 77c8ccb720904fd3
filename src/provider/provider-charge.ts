import { storableWithin } from '../common/unicode';

/** A charge as the provider reports it (snake_case, as on the wire). */
export interface ProviderCharge {
  id: string;
  status: 'succeeded' | 'failed' | 'pending';
  amount: number;
  currency: string;
  failure_code: string | null;
}

const STATUSES: readonly string[] = ['succeeded', 'failed', 'pending'] satisfies ProviderCharge['status'][];

/**
 * The longest charge id and failure code kept, in code points: far above any
 * real one, and backed by the schema's column types
 * (provider_reference_check, failure_code_check).
 */
export const PROVIDER_CHARGE_ID_MAX = 255;
export const PROVIDER_FAILURE_CODE_MAX = 100;

/**
 * The charge in a provider body, or undefined when the shape is wrong. One
 * reading for every path a charge arrives by (the answer to a charge, a
 * lookup, a provider event). Money decisions are made on this object, so
 * nothing is assumed: every field is checked, only the known fields are
 * copied, and every string is one the schema can store as it is (no U+0000,
 * no lone surrogate, within its column's limit). An answer that fails is
 * unusable, so its outcome stays unknown: it is never read as a decline.
 */
export function parseProviderCharge(body: unknown): ProviderCharge | undefined {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return undefined;
  const { id, status, amount, currency, failure_code } = body as Record<string, unknown>;
  if (
    typeof id !== 'string' || !storableWithin(id, 1, PROVIDER_CHARGE_ID_MAX) ||
    typeof status !== 'string' || !STATUSES.includes(status) ||
    !Number.isSafeInteger(amount) || (amount as number) < 0 ||
    typeof currency !== 'string' || !/^[A-Z]{3}$/.test(currency) ||
    (failure_code !== null && (typeof failure_code !== 'string' || !storableWithin(failure_code, 1, PROVIDER_FAILURE_CODE_MAX)))
  ) {
    return undefined;
  }
  return { id, status: status as ProviderCharge['status'], amount: amount as number, currency, failure_code };
}
