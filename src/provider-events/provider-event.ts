import { DomainError, ErrorCode } from '../common/domain-error';
import type { ProviderCharge } from '../provider/provider.client';
import { parseProviderCharge } from '../provider/provider-charge';

export const PROVIDER_EVENT_TYPES = ['charge.pending', 'charge.succeeded', 'charge.failed'] as const;
/** The provider's refund events: read so far only to be acknowledged, as nothing here applies them yet. */
export const REFUND_EVENT_TYPES = ['refund.pending', 'refund.succeeded', 'refund.failed'] as const;

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
 * A refund event, of which only the id and type are read: the provider sends
 * them, and redelivers until a 2xx, so they are acknowledged without effect
 * until this API applies refund events.
 */
export interface UnappliedProviderEvent {
  id: string;
  type: (typeof REFUND_EVENT_TYPES)[number];
}

/**
 * Reads a verified event body. Signed by the provider does not mean well
 * formed: a body this code cannot read is refused (400) rather than guessed.
 */
export function parseProviderEvent(body: unknown): ProviderEvent | UnappliedProviderEvent {
  const event = body as { id?: unknown; type?: unknown; data?: Record<string, unknown> } | null;
  const id = event?.id;
  const type = event?.type;
  if (isEventId(id) && REFUND_EVENT_TYPES.includes(type as UnappliedProviderEvent['type'])) {
    return { id, type: type as UnappliedProviderEvent['type'] };
  }
  const data = event?.data;
  const charge = data === undefined || data === null ? undefined : parseProviderCharge(data);
  if (
    !isEventId(id) ||
    !PROVIDER_EVENT_TYPES.includes(type as ProviderEvent['type']) ||
    charge === undefined ||
    typeof data?.provider_key !== 'string' ||
    !Number.isInteger(data.version) ||
    (data.version as number) < 1 ||
    (data.version as number) > MAX_VERSION ||
    `charge.${charge.status}` !== type
  ) {
    throw new DomainError(ErrorCode.ParameterInvalid, 'The provider event is not one this API can read.');
  }
  return {
    id,
    type: type as ProviderEvent['type'],
    data: { charge, providerKey: data.provider_key, version: data.version as number },
  };
}

/** A charge event, the kind this API applies. */
export function isChargeEvent(event: ProviderEvent | UnappliedProviderEvent): event is ProviderEvent {
  return 'data' in event;
}

/** An event id the processed-messages record can hold. */
function isEventId(id: unknown): id is string {
  return typeof id === 'string' && id.length > 0 && id.length <= 255;
}
