import { DomainError, ErrorCode } from '../common/domain-error';
import { TransportError, TransportErrorCode } from '../common/transport-error';

export function unauthenticated(): DomainError {
  return new DomainError(ErrorCode.Unauthenticated, 'Send a valid API key as "Authorization: Bearer <key>".');
}

export function tooManyRequests(retryAfterSeconds: number): TransportError {
  return new TransportError(TransportErrorCode.RateLimited, 'Too many requests for this API key; slow down.', { retryAfterSeconds });
}

export function tooManyFailedAuthentications(retryAfterSeconds: number): TransportError {
  return new TransportError(TransportErrorCode.RateLimited, 'Too many failed authentications from this address; slow down.', {
    retryAfterSeconds,
  });
}
