export type ChargeStatus = 'succeeded' | 'failed' | 'pending';

/** A charge as the provider answers it. */
export interface Charge {
  id: string;
  status: ChargeStatus;
  amount: number;
  currency: string;
  failure_code: string | null;
  /** Our payment id, kept so audits can match charges to payments. */
  reference: string;
  idempotency_key: string;
  created_at: string;
}

/** What a caller asks to charge; the same key must always come with the same parameters. */
export interface ChargeParams {
  amount: number;
  currency: string;
  payment_method: string;
  reference: string;
}

/**
 * A charge as held and journaled: with the payment method it was asked with (to
 * detect a key reused with other parameters), and its status as recorded; a
 * pending status is settled when read, never rewritten.
 */
export interface ChargeRecord extends Charge {
  payment_method: string;
}

/** A refund takes the same statuses as a charge, and a pending one settles the same way. */
export type RefundStatus = ChargeStatus;

/** A refund as the provider answers it. */
export interface Refund {
  id: string;
  object: 'refund';
  /** The id (ch_…) of the charge refunded. */
  charge: string;
  amount: number;
  /** The charge's currency. */
  currency: string;
  status: RefundStatus;
  failure_code: string | null;
  /** Our refund id, kept so audits can match provider refunds to refunds. */
  reference: string;
  idempotency_key: string;
  created_at: string;
}

/** What a caller asks to refund; the same key must always come with the same parameters. */
export interface RefundParams {
  /** The charge's id (ch_…). */
  charge: string;
  amount: number;
  reference: string;
}

/**
 * A refund as held and journaled: the answer itself, with its status as
 * recorded; like a charge's, a pending status is settled when read.
 */
export type RefundRecord = Refund;

/** What an event is about: a charge or a refund, each with its own versions per provider key. */
export type EventObject = 'charge' | 'refund';

export type ChargeEventType = 'charge.pending' | 'charge.succeeded' | 'charge.failed';
export type RefundEventType = 'refund.pending' | 'refund.succeeded' | 'refund.failed';

/** The charge as GET /charges/:key answers it at that version. */
export interface ChargeEventData extends Charge {
  /** The charge's idempotency key, under the name the API files provider charges by. */
  provider_key: string;
  /** 1 when created, one more with each change of the charge. */
  version: number;
}

/** The refund as GET /refunds/:key answers it at that version. */
export interface RefundEventData extends Refund {
  /** The refund's idempotency key (not the charge's). */
  provider_key: string;
  /** 1 when created, one more with each change of the refund. */
  version: number;
}

/** One change of a charge, exactly as delivered (the signed body). */
export interface ChargeEvent {
  id: string;
  type: ChargeEventType;
  created_at: string;
  data: ChargeEventData;
}

/** One change of a refund, exactly as delivered (the signed body). */
export interface RefundEvent {
  id: string;
  type: RefundEventType;
  created_at: string;
  data: RefundEventData;
}

/** Every event the provider emits, delivered and journaled alike. */
export type ProviderEvent = ChargeEvent | RefundEvent;

/** Its delivery state, as GET /events lists it beside the event. */
interface DeliveryState {
  delivered: boolean;
  attempts: number;
}

/**
 * An event as GET /events lists it: as sent, plus its delivery state.
 * `delivered` is true once a delivery was acknowledged with a 2xx; `attempts`
 * counts the HTTP attempts up to that acknowledgement (a duplicate delivery is
 * not counted), or so far while unacknowledged. Attempts of a provider run that
 * ended before the acknowledgement are not journaled, so are not counted.
 */
export type ListedChargeEvent = ChargeEvent & DeliveryState;
export type ListedRefundEvent = RefundEvent & DeliveryState;
export type ListedProviderEvent = ListedChargeEvent | ListedRefundEvent;
