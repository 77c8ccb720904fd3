import type { Webhook } from 'standardwebhooks';
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

/**
 * One delivery attempt's request, per Standard Webhooks: the timestamp is the
 * attempt's, so a receiver's replay window counts from this attempt, and the
 * id is the event's, so the receiver can drop a redelivery.
 */
export function signedDelivery(
  webhook: Webhook,
  event: ChargeEvent,
  at: Date,
): { headers: Record<string, string>; body: string } {
  const body = JSON.stringify(event);
  return {
    headers: {
      'content-type': 'application/json',
      'webhook-id': event.id,
      'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
      'webhook-signature': webhook.sign(event.id, at, body),
    },
    body,
  };
}
