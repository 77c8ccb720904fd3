import type { Webhook } from 'standardwebhooks';
import { type SignedRequest, signedWebhookRequest } from '../common/signed-webhook';
import type { Charge, ChargeEvent, ChargeRecord } from './mock-provider.types';

/**
 * A charge's history as versions, derived from its immutable record and the
 * clock: version 1 is the charge as created; a pm_card_pending charge has a
 * version 2, succeeded, from `settleMs` after its creation. Reads, events and
 * restarts all derive from this one rule, so they cannot disagree.
 */

/** When a pending charge settles (epoch ms); undefined for a charge that never changes. */
export function settlesAt(record: ChargeRecord, settleMs: number): number | undefined {
  return record.status === 'pending' ? Date.parse(record.created_at) + settleMs : undefined;
}

/** The version the charge has reached at `now` (epoch ms). */
export function versionAt(record: ChargeRecord, now: number, settleMs: number): number {
  const settles = settlesAt(record, settleMs);
  return settles !== undefined && now >= settles ? 2 : 1;
}

/** The charge as the API answers it at `version`. */
export function chargeAt(record: ChargeRecord, version: number): Charge {
  return {
    id: record.id,
    status: version >= 2 ? 'succeeded' : record.status,
    amount: record.amount,
    currency: record.currency,
    failure_code: record.failure_code,
    reference: record.reference,
    idempotency_key: record.idempotency_key,
    created_at: record.created_at,
  };
}

export function chargeEvent(record: ChargeRecord, version: number, id: string, createdAt: Date): ChargeEvent {
  const charge = chargeAt(record, version);
  return {
    id,
    type: `charge.${charge.status}`,
    created_at: createdAt.toISOString(),
    data: { ...charge, provider_key: record.idempotency_key, version },
  };
}

/** One delivery attempt of a charge event, signed as every webhook of ours is. */
export function signedDelivery(webhook: Webhook, event: ChargeEvent, at: Date): SignedRequest {
  return signedWebhookRequest(webhook, event.id, JSON.stringify(event), at);
}
