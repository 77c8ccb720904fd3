import type { Webhook } from 'standardwebhooks';
import { type SignedRequest, signedWebhookRequest } from '../common/signed-webhook';
import type {
  Charge,
  ChargeEvent,
  ChargeRecord,
  ChargeStatus,
  EventObject,
  ProviderEvent,
  Refund,
  RefundEvent,
  RefundRecord,
} from './mock-provider.types';

/**
 * A charge's or a refund's history as versions, derived from its immutable
 * record and the clock: version 1 is the record as created; a pending one has
 * a version 2, succeeded, from `settleMs` after its creation. Reads, events and
 * restarts all derive from this one rule, so they cannot disagree.
 */

/** What the rule needs of a record: a charge and a refund settle alike. */
interface Settling {
  status: ChargeStatus;
  created_at: string;
}

/** When a pending record settles (epoch ms); undefined for one that never changes. */
export function settlesAt(record: Settling, settleMs: number): number | undefined {
  return record.status === 'pending' ? Date.parse(record.created_at) + settleMs : undefined;
}

/** The version the record has reached at `now` (epoch ms). */
export function versionAt(record: Settling, now: number, settleMs: number): number {
  const settles = settlesAt(record, settleMs);
  return settles !== undefined && now >= settles ? 2 : 1;
}

/** The status a record shows at `version`. */
function statusAt(record: Settling, version: number): ChargeStatus {
  return version >= 2 ? 'succeeded' : record.status;
}

/** The charge as the API answers it at `version`. */
export function chargeAt(record: ChargeRecord, version: number): Charge {
  return {
    id: record.id,
    status: statusAt(record, version),
    amount: record.amount,
    currency: record.currency,
    failure_code: record.failure_code,
    reference: record.reference,
    idempotency_key: record.idempotency_key,
    created_at: record.created_at,
  };
}

/** The refund as the API answers it at `version`. */
export function refundAt(record: RefundRecord, version: number): Refund {
  return { ...record, status: statusAt(record, version) };
}

export function chargeEvent(record: ChargeRecord, version: number, id: string, createdAt: Date): ChargeEvent {
  return eventOf(chargeAt(record, version), 'charge', version, id, createdAt) as ChargeEvent;
}

export function refundEvent(record: RefundRecord, version: number, id: string, createdAt: Date): RefundEvent {
  return eventOf(refundAt(record, version), 'refund', version, id, createdAt) as RefundEvent;
}

/** One change of a charge or a refund: typed by its object and status, filed under its own provider key. */
function eventOf(
  answer: Charge | Refund,
  object: EventObject,
  version: number,
  id: string,
  createdAt: Date,
): ProviderEvent {
  return {
    id,
    type: `${object}.${answer.status}`,
    created_at: createdAt.toISOString(),
    data: { ...answer, provider_key: answer.idempotency_key, version },
  } as ProviderEvent;
}

/** What an event is about, read from its type. */
export function objectOf(event: ProviderEvent): EventObject {
  return event.type.startsWith('refund.') ? 'refund' : 'charge';
}

/** One delivery attempt of an event, signed as every webhook of ours is. */
export function signedDelivery(webhook: Webhook, event: ProviderEvent, at: Date): SignedRequest {
  return signedWebhookRequest(webhook, event.id, JSON.stringify(event), at);
}
