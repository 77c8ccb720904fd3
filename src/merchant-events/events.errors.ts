import { DomainError, ErrorCode } from '../common/domain-error';
import { EVENT_ID_PATTERN } from '../ledger/outbox';

/** Names the id only when it is one: a client's arbitrary path is not echoed back. */
export function eventNotFound(id: string): DomainError {
  const message = EVENT_ID_PATTERN.test(id) ? `No event ${id}.` : 'No such event.';
  return new DomainError(ErrorCode.NotFound, message, { param: 'id' });
}

/** A list cursor naming no event of the client's: a bad parameter, not a missing resource. */
export function unknownEventCursor(id: string): DomainError {
  return new DomainError(ErrorCode.ParameterInvalid, `No event ${id}.`, { param: 'starting_after' });
}
