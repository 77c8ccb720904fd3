import { DomainError, ErrorCode } from '../common/domain-error';

/** A request holding the key finishes within the provider deadline; polling each second is cheap. */
const IN_PROGRESS_RETRY_AFTER_SECONDS = 1;

export function keyReused(): DomainError {
  return new DomainError(
    ErrorCode.IdempotencyKeyReused,
    'This Idempotency-Key was used with a different request; use a new key for a new payment.',
  );
}

export function keyInUse(): DomainError {
  return new DomainError(
    ErrorCode.IdempotencyKeyInUse,
    'A request with this Idempotency-Key is still in progress; retry later.',
    { retryAfterSeconds: IN_PROGRESS_RETRY_AFTER_SECONDS },
  );
}
