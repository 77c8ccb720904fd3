import { DomainError, type ErrorCode } from '../common/domain-error';
import { errorReply } from '../common/error-envelope';
import type { StoredResponse } from './lease';
import type { Operation, OperationRow } from './operation';

/** An operator's resolution of a review: who, and why. */
export interface Resolution {
  by: string;
  reason: string;
}

/**
 * Where an undecided row (a payment, a refund) can move, and why. succeeded
 * and failed are final: from pending or from requires_review.
 * requires_review is reached from pending only, and leaves the row
 * undecided. `providerId` is the id of what the provider made (a charge, a
 * refund); a failure without one (null) is an operator's resolution of
 * something the provider never received.
 */
export type FinalOutcome =
  | { status: 'succeeded'; providerId: string; resolution?: Resolution }
  | {
      status: 'failed';
      providerId: string | null;
      failureCode: string;
      failureMessage: string;
      resolution?: Resolution;
    }
  | { status: 'requires_review'; failureCode: string; failureMessage: string };

/**
 * The row as the statement that records `outcome` leaves it (see
 * OperationsRepository.recordOutcomeUnderLease, whose SET this mirrors), all
 * but updated_at, which that statement takes from Postgres' now(). Exact for
 * an undecided row as last read: what the API shows of a row and is not set
 * here never changes while it is undecided (a payment's refund sums move
 * only once it has succeeded).
 */
export function decidedAs<R extends OperationRow>(operation: Operation<R>, row: R, outcome: FinalOutcome): R {
  const resolution = outcome.status === 'requires_review' ? undefined : outcome.resolution;
  const providerId = (row as unknown as Record<string, string | null>)[operation.providerIdProperty];
  return {
    ...row,
    status: outcome.status,
    [operation.providerIdProperty]: ('providerId' in outcome ? outcome.providerId : null) ?? providerId,
    failureCode: outcome.status === 'succeeded' ? null : outcome.failureCode,
    failureMessage: outcome.status === 'succeeded' ? null : outcome.failureMessage,
    resolvedBy: resolution?.by ?? null,
    resolutionReason: resolution?.reason ?? null,
  };
}

/**
 * The response a final row answers with, stored on its idempotency key and
 * replayed byte for byte: 201 with the resource when it succeeded; when it
 * failed, the error `failed.code` (402) with the resource embedded under
 * `failed.embedAs`. An undecided row has none.
 */
export function finalAnswer(
  row: OperationRow,
  resource: object,
  failed: { code: ErrorCode; message: string; embedAs: string },
): StoredResponse {
  switch (row.status) {
    case 'succeeded':
      return { status: 201, body: JSON.stringify(resource) };
    case 'failed': {
      const { status, body } = errorReply(new DomainError(failed.code, row.failureMessage ?? failed.message), {
        [failed.embedAs]: resource,
      });
      return { status, body };
    }
    case 'requires_review':
    case 'pending':
      throw new Error(`${row.id} is ${row.status}: it has no final response`);
  }
}
