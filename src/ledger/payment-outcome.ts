import type { ProviderCharge } from '../provider/provider.client';
import type { StoredResponse } from './lease';
import { DomainError, ErrorCode } from '../common/domain-error';
import { errorReply } from '../common/error-envelope';
import { toResource } from './payment-resource';
import type { Payment } from './payments.table';

/** An operator's resolution of a review: who, and why. */
export interface Resolution {
  by: string;
  reason: string;
}

/**
 * Where an undecided payment can move, and why. succeeded and failed are
 * final: from pending or from requires_review. requires_review is reached from
 * pending only, and leaves the payment undecided. A failure without a charge
 * (providerChargeId null) is an operator's resolution of a charge the provider
 * never received.
 */
export type FinalOutcome =
  | { status: 'succeeded'; providerChargeId: string; resolution?: Resolution }
  | {
      status: 'failed';
      providerChargeId: string | null;
      failureCode: string;
      failureMessage: string;
      resolution?: Resolution;
    }
  | { status: 'requires_review'; failureCode: string; failureMessage: string };

/**
 * What a provider's answer means for the payment. A pending charge is not an
 * outcome: the payment stays pending and reconciliation asks again later. A
 * charge for another amount or currency than the payment's is never taken as
 * its outcome, whatever its status: money moved that nobody asked for, and a
 * person must look.
 */
export function outcomeOfCharge(
  charge: ProviderCharge,
  payment: Pick<Payment, 'amount' | 'currency'>,
): FinalOutcome | undefined {
  if (charge.amount !== payment.amount || charge.currency !== payment.currency) {
    return {
      status: 'requires_review',
      failureCode: 'provider_charge_mismatch',
      failureMessage: `The provider's charge ${charge.id} is for ${charge.amount} ${charge.currency}.`,
    };
  }
  switch (charge.status) {
    case 'succeeded':
      return { status: 'succeeded', providerChargeId: charge.id };
    case 'failed': {
      const failureCode = charge.failure_code ?? 'card_declined';
      return {
        status: 'failed',
        providerChargeId: charge.id,
        failureCode,
        failureMessage:
          failureCode === 'card_declined'
            ? 'The card was declined.'
            : `The provider declined the payment (${failureCode}).`,
      };
    }
    case 'pending':
      return undefined;
  }
}

/**
 * The response a final payment answers with, stored on its idempotency key and
 * replayed byte for byte: 201 for a charge, 402 with the failed payment
 * embedded for a decline. An undecided payment has none.
 */
export function finalResponseFor(payment: Payment, updatedAt?: string): StoredResponse {
  const resource = toResource(payment, updatedAt);
  switch (payment.status) {
    case 'succeeded':
      return { status: 201, body: JSON.stringify(resource) };
    case 'failed': {
      const declined = new DomainError(ErrorCode.CardDeclined, payment.failureMessage ?? 'The card was declined.');
      const { status, body } = errorReply(declined, { payment: resource });
      return { status, body };
    }
    case 'requires_review':
    case 'pending':
      throw new Error(`payment ${payment.id} is ${payment.status}: it has no final response`);
  }
}

/**
 * The payment as the statement that records `outcome` leaves it (see
 * PaymentsRepository.recordOutcomeUnderLease, whose SET this mirrors), all
 * but updated_at, which that statement takes from Postgres' now(). Exact for
 * an undecided payment as last read: what the API shows of a payment and is
 * not set here (amount, currency, method, order, description, metadata,
 * created_at) never changes after the insert.
 */
export function decidedAs(payment: Payment, outcome: FinalOutcome): Payment {
  const resolution = outcome.status === 'requires_review' ? undefined : outcome.resolution;
  return {
    ...payment,
    status: outcome.status,
    providerChargeId: ('providerChargeId' in outcome ? outcome.providerChargeId : null) ?? payment.providerChargeId,
    failureCode: outcome.status === 'succeeded' ? null : outcome.failureCode,
    failureMessage: outcome.status === 'succeeded' ? null : outcome.failureMessage,
    resolvedBy: resolution?.by ?? null,
    resolutionReason: resolution?.reason ?? null,
  };
}
