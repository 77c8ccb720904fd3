import type { Operation, OperationName, OperationRow } from '../ledger/operation';
import type { FinalOutcome } from '../ledger/outcome';
import { outcomeOfCharge } from '../ledger/payment-outcome';
import { PAYMENTS, REFUNDS } from '../ledger/operations';
import type { Payment } from '../ledger/payments.table';
import { outcomeOfRefund } from '../ledger/refund-outcome';
import type { Refund } from '../ledger/refunds.table';
import type { CallOptions, ChargeInput, ProviderClient, UnknownOutcome } from '../provider/provider.client';

/** The provider's answer to a submission: an outcome (undefined: pending there, no outcome yet), or none. */
export type Submitted = { kind: 'answered'; outcome: FinalOutcome | undefined } | UnknownOutcome;

/** The provider's answer to a lookup by provider key. */
export type LookedUp = { kind: 'found'; outcome: FinalOutcome | undefined } | { kind: 'not_found' } | UnknownOutcome;

/**
 * An operation as the provider sees it: the one call that makes it (or, for
 * a provider key already used, answers what it made: the provider's POST is
 * idempotent per key), the lookup that only reads, and what each answer
 * means for the row. The request and the reconciliation worker both call the
 * provider through this, so the two can never present a row differently.
 */
export interface ProviderSide<R extends OperationRow> {
  readonly operation: Operation<R>;
  submit(provider: ProviderClient, row: R, opts: CallOptions): Promise<Submitted>;
  lookup(provider: ProviderClient, row: R, opts: CallOptions): Promise<LookedUp>;
}

/** What the provider is asked to charge for a payment, by the request and the worker alike. */
export function chargeInputFor(payment: Payment): ChargeInput {
  return {
    providerKey: payment.providerKey,
    amount: payment.amount,
    currency: payment.currency,
    paymentMethod: payment.paymentMethod,
    reference: payment.id,
  };
}

export const PAYMENT_SIDE: ProviderSide<Payment> = {
  operation: PAYMENTS,
  async submit(provider, payment, opts) {
    const result = await provider.createCharge(chargeInputFor(payment), opts);
    return result.kind === 'answered' ? { kind: 'answered', outcome: outcomeOfCharge(result.charge, payment) } : result;
  },
  async lookup(provider, payment, opts) {
    const result = await provider.getCharge(payment.providerKey, opts);
    return result.kind === 'found' ? { kind: 'found', outcome: outcomeOfCharge(result.charge, payment) } : result;
  },
};

export const REFUND_SIDE: ProviderSide<Refund> = {
  operation: REFUNDS,
  async submit(provider, refund, opts) {
    const result = await provider.createRefund(
      { providerKey: refund.providerKey, charge: refund.providerChargeId, amount: refund.amount, reference: refund.id },
      opts,
    );
    return result.kind === 'answered' ? { kind: 'answered', outcome: outcomeOfRefund(result.refund, refund) } : result;
  },
  async lookup(provider, refund, opts) {
    const result = await provider.getRefund(refund.providerKey, opts);
    return result.kind === 'found' ? { kind: 'found', outcome: outcomeOfRefund(result.refund, refund) } : result;
  },
};

/** Each operation's side, by name: what a reconcile job names. */
export const PROVIDER_SIDES: Record<OperationName, ProviderSide<OperationRow>> = { payment: PAYMENT_SIDE, refund: REFUND_SIDE };
