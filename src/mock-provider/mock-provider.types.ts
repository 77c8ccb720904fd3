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

export type ChargeEventType = 'charge.pending' | 'charge.succeeded' | 'charge.failed';

/** The charge as GET /charges/:key answers it at that version. */
export interface ChargeEventData extends Charge {
  /** The charge's idempotency key, under the name the API files provider charges by. */
  provider_key: string;
  /** 1 when created, one more with each change of the charge. */
  version: number;
}

/** One change of a charge, exactly as delivered (the signed body). */
export interface ChargeEvent {
  id: string;
  type: ChargeEventType;
  created_at: string;
  data: ChargeEventData;
}

/**
 * An event as GET /events lists it: as sent, plus its delivery state.
 * `delivered` is true once a delivery was acknowledged with a 2xx; `attempts`
 * counts the HTTP attempts up to that acknowledgement (a duplicate delivery is
 * not counted), or so far while unacknowledged. Attempts of a provider run that
 * ended before the acknowledgement are not journaled, so are not counted.
 */
export interface ListedChargeEvent extends ChargeEvent {
  delivered: boolean;
  attempts: number;
}
