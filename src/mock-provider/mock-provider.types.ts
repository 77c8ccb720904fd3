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
