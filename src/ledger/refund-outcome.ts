import type { ProviderRefund } from '../provider/provider-refund';
import { ErrorCode } from '../common/domain-error';
import type { StoredResponse } from './lease';
import { type FinalOutcome, finalAnswer } from './outcome';
import { toRefundResource } from './refund-resource';
import type { Refund } from './refunds.table';

/**
 * What a provider's refund means for the refund, as outcomeOfCharge reads a
 * charge: pending is no outcome yet; a refund of another amount or of
 * another charge than ours is never taken as the outcome, but sent to review.
 */
export function outcomeOfRefund(
  answer: ProviderRefund,
  refund: Pick<Refund, 'amount' | 'providerChargeId'>,
): FinalOutcome | undefined {
  if (answer.amount !== refund.amount || answer.charge !== refund.providerChargeId) {
    return {
      status: 'requires_review',
      failureCode: 'provider_refund_mismatch',
      failureMessage: `The provider's refund ${answer.id} is of ${answer.amount} on ${answer.charge}.`,
    };
  }
  switch (answer.status) {
    case 'succeeded':
      return { status: 'succeeded', providerId: answer.id };
    case 'failed': {
      const failureCode = answer.failure_code ?? 'refund_declined';
      return {
        status: 'failed',
        providerId: answer.id,
        failureCode,
        failureMessage: `The provider refused the refund (${failureCode}).`,
      };
    }
    case 'pending':
      return undefined;
  }
}

/**
 * The response a final refund answers with: 201, or 402 `refund_failed`
 * with the failed refund embedded (see finalAnswer).
 */
export function finalRefundResponseFor(refund: Refund, updatedAt?: string): StoredResponse {
  return finalAnswer(refund, toRefundResource(refund, updatedAt), {
    code: ErrorCode.RefundFailed,
    message: 'The provider refused the refund.',
    embedAs: 'refund',
  });
}
