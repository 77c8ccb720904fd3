import { DomainError, ErrorCode } from '../common/domain-error';

export function orderAlreadyPaid(orderId: string | undefined): DomainError {
  return new DomainError(ErrorCode.OrderAlreadyPaid, `Order ${orderId} already has a payment that did not fail.`, {
    param: 'order_id',
  });
}

export function providerUnavailable(waitMs: number): DomainError {
  return new DomainError(
    ErrorCode.ProviderUnavailable,
    'The payment provider is unavailable; no charge was attempted. Retry later with the same Idempotency-Key.',
    { retryAfterSeconds: Math.ceil(waitMs / 1000) },
  );
}

export function paymentNotFound(id: string): DomainError {
  return new DomainError(ErrorCode.NotFound, `No payment ${id}.`, { param: 'id' });
}

/** A list cursor naming no payment of the client's: a bad parameter, not a missing resource. */
export function unknownCursor(id: string): DomainError {
  return new DomainError(ErrorCode.ParameterInvalid, `No payment ${id}.`, { param: 'starting_after' });
}
