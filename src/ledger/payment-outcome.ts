import type { ProviderCharge } from '../provider/provider.client';
import type { StoredResponse } from './lease';
import { ErrorCode } from '../common/domain-error';
import { type FinalOutcome, finalAnswer } from './outcome';
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
 * The response a final payment answers with: 201, or 402 `card_declined`
 * with the failed payment embedded (see finalAnswer).
 */
export function finalResponseFor(payment: Payment, updatedAt?: string): StoredResponse {
  return finalAnswer(payment, toResource(payment, updatedAt), {
    code: ErrorCode.CardDeclined,
    message: 'The card was declined.',
    embedAs: 'payment',
  });
}
