import type { ProviderCharge } from '../provider/provider.client';
import type { StoredResponse } from '../idempotency/idempotency.repository';
import { DomainError, ErrorCode } from '../common/domain-error';
import { errorReply } from '../common/error-envelope';
import { toResource } from './payment';
import type { Payment } from './payments.table';

/** A final state a pending payment can move to, and why. */
export type FinalOutcome =
  | { status: 'succeeded'; providerChargeId: string }
  | { status: 'failed'; providerChargeId: string; failureCode: string; failureMessage: string }
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
 * embedded for a decline, and 202 for a payment a person must review (the
 * client learns the state; retrying will not change it).
 */
export function finalResponseFor(payment: Payment): StoredResponse {
  const resource = toResource(payment);
  switch (payment.status) {
    case 'succeeded':
      return { status: 201, body: JSON.stringify(resource) };
    case 'failed': {
      const declined = new DomainError(ErrorCode.CardDeclined, payment.failureMessage ?? 'The card was declined.');
      const { status, body } = errorReply(declined, { payment: resource });
      return { status, body };
    }
    case 'requires_review':
      return { status: 202, body: JSON.stringify(resource) };
    case 'pending':
      throw new Error(`payment ${payment.id} is still pending: it has no final response`);
  }
}
