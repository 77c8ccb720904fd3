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
 * The charge in a provider body, or undefined when the shape is wrong. Money
 * decisions are made on this object, so nothing is assumed: every field is
 * checked, and only the known fields are copied.
 */
export function parseProviderCharge(body: unknown): ProviderCharge | undefined {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return undefined;
  const { id, status, amount, currency, failure_code } = body as Record<string, unknown>;
  if (
    typeof id !== 'string' || id === '' ||
    typeof status !== 'string' || !STATUSES.includes(status) ||
    !Number.isSafeInteger(amount) || (amount as number) < 0 ||
    typeof currency !== 'string' || !/^[A-Z]{3}$/.test(currency) ||
    (failure_code !== null && typeof failure_code !== 'string')
  ) {
    return undefined;
  }
  return { id, status: status as ProviderCharge['status'], amount: amount as number, currency, failure_code };
}
