import type { ProviderCharge } from '../provider/provider.client';
import type { StoredResponse } from './lease';
import { DomainError, ErrorCode } from '../common/domain-error';
import { errorReply } from '../common/error-envelope';
import type { FinalOutcome } from './outcome';
import { toResource } from './payment-resource';
import type { Payment } from './payments.table';

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
      return { status: 'succeeded', providerId: charge.id };
    case 'failed': {
      const failureCode = charge.failure_code ?? 'card_declined';
      return {
        status: 'failed',
        providerId: charge.id,
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
