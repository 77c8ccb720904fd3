import { DomainError, ErrorCode } from '../common/domain-error';
import { PAYMENT_ID_PATTERN } from '../ledger/payment-id';

export function orderAlreadyPaid(orderId: string | undefined): DomainError {
  return new DomainError(ErrorCode.OrderAlreadyPaid, `Order ${orderId} already has a payment that did not fail.`, {
    param: 'order_id',
  });
}

/** Names the id only when it is one: a client's arbitrary path is not echoed back. */
export function paymentNotFound(id: string): DomainError {
  const message = PAYMENT_ID_PATTERN.test(id) ? `No payment ${id}.` : 'No such payment.';
  return new DomainError(ErrorCode.NotFound, message, { param: 'id' });
}

/** A list cursor naming no payment of the client's: a bad parameter, not a missing resource. */
export function unknownCursor(id: string): DomainError {
  return new DomainError(ErrorCode.ParameterInvalid, `No payment ${id}.`, { param: 'starting_after' });
}
