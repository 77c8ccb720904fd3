import { DomainError, ErrorCode } from '../common/domain-error';
import { type ProviderCharge, parseProviderCharge } from '../provider/provider-charge';
import { type ProviderRefund, parseProviderRefund } from '../provider/provider-refund';

export const CHARGE_EVENT_TYPES = ['charge.pending', 'charge.succeeded', 'charge.failed'] as const;
export const REFUND_EVENT_TYPES = ['refund.pending', 'refund.succeeded', 'refund.failed'] as const;

/**
 * The largest version payments.provider_version (a Postgres integer) holds:
 * a larger one, even signed, is refused here rather than failing the UPDATE
 * that would store it with a 500. A refund's version is held to it too, so
 * whatever stores it can be an integer column as well.
 */
const MAX_VERSION = 2 ** 31 - 1;

/** A charge event as the provider sends it: the charge after one change, and that change's version. */
export interface ChargeProviderEvent {
  id: string;
  type: (typeof CHARGE_EVENT_TYPES)[number];
  data: { charge: ProviderCharge; providerKey: string; version: number };
}

/**
 * A refund event as the provider sends it: the refund after one change, filed
 * under the refund's own provider key (not its charge's), and that change's
 * version, counted per refund.
 */
export interface RefundProviderEvent {
  id: string;
  type: (typeof REFUND_EVENT_TYPES)[number];
  data: { refund: ProviderRefund; providerKey: string; version: number };
}

export type ProviderEvent = ChargeProviderEvent | RefundProviderEvent;

/**
 * Reads a verified event body. Signed by the provider does not mean well
 * formed: a body this code cannot read is refused (400) rather than guessed.
 * A refund event is read as fully as a charge event, though nothing applies
 * it yet, so that what is acknowledged is always an event this API could
 * apply: one the provider sends malformed is refused now, not found out once
 * refunds depend on it.
 */
export function parseProviderEvent(body: unknown): ProviderEvent {
  const event = body as { id?: unknown; type?: unknown; data?: unknown } | null;
  const id = event?.id;
  const type = event?.type;
  const data = event?.data as Record<string, unknown> | null | undefined;
  const providerKey = data?.provider_key;
  const version = data?.version;
  if (isEventId(id) && typeof providerKey === 'string' && isVersion(version)) {
    if (CHARGE_EVENT_TYPES.includes(type as ChargeProviderEvent['type'])) {
      const charge = parseProviderCharge(data);
      if (charge && `charge.${charge.status}` === type) {
        return { id, type: type as ChargeProviderEvent['type'], data: { charge, providerKey, version } };
      }
    } else if (REFUND_EVENT_TYPES.includes(type as RefundProviderEvent['type'])) {
      const refund = parseProviderRefund(data);
      if (refund && `refund.${refund.status}` === type) {
        return { id, type: type as RefundProviderEvent['type'], data: { refund, providerKey, version } };
      }
    }
  }
  throw new DomainError(ErrorCode.ParameterInvalid, 'The provider event is not one this API can read.');
}

/** A charge event, the kind this API applies. */
export function isChargeEvent(event: ProviderEvent): event is ChargeProviderEvent {
  return 'charge' in event.data;
}

/** A refund event, acknowledged and not applied yet. */
export function isRefundEvent(event: ProviderEvent): event is RefundProviderEvent {
  return 'refund' in event.data;
}

/** An event id the processed-messages record can hold. */
function isEventId(id: unknown): id is string {
  return typeof id === 'string' && id.length > 0 && id.length <= 255;
}

/** A change's version: counted from 1, and within what an integer column holds. */
function isVersion(version: unknown): version is number {
  return Number.isInteger(version) && (version as number) >= 1 && (version as number) <= MAX_VERSION;
}
