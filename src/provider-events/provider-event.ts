import { DomainError, ErrorCode } from '../common/domain-error';
import type { ProviderCharge } from '../provider/provider.client';
import { parseProviderCharge } from '../provider/provider-charge';

export const PROVIDER_EVENT_TYPES = ['charge.pending', 'charge.succeeded', 'charge.failed'] as const;

/**
 * The largest version payments.provider_version (a Postgres integer) holds:
 * a larger one, even signed, is refused here rather than failing the UPDATE
 * that would store it with a 500.
 */
const MAX_VERSION = 2 ** 31 - 1;

/** A provider event as the provider sends it: the charge after one change, and that change's version. */
export interface ProviderEvent {
  id: string;
  type: (typeof PROVIDER_EVENT_TYPES)[number];
  data: { charge: ProviderCharge; providerKey: string; version: number };
}

/**
 * Reads a verified event body. Signed by the provider does not mean well
 * formed: a body this code cannot read is refused (400) rather than guessed.
 */
export function parseProviderEvent(body: unknown): ProviderEvent {
  const event = body as { id?: unknown; type?: unknown; data?: Record<string, unknown> } | null;
  const data = event?.data;
  const charge = data === undefined || data === null ? undefined : parseProviderCharge(data);
  if (
    typeof event?.id !== 'string' ||
    event.id.length === 0 ||
    event.id.length > 255 ||
    !PROVIDER_EVENT_TYPES.includes(event.type as ProviderEvent['type']) ||
    charge === undefined ||
    typeof data?.provider_key !== 'string' ||
    !Number.isInteger(data.version) ||
    (data.version as number) < 1 ||
    (data.version as number) > MAX_VERSION ||
    `charge.${charge.status}` !== event.type
  ) {
    throw new DomainError(ErrorCode.ParameterInvalid, 'The provider event is not one this API can read.');
  }
  return {
    id: event.id,
    type: event.type as ProviderEvent['type'],
    data: { charge, providerKey: data.provider_key, version: data.version as number },
  };
}
