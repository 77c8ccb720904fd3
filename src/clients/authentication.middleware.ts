import type { NextFunction, Request, Response } from 'express';
import { DomainError, ErrorCode } from '../common/domain-error';
import type { AuthFailureLimiter } from './auth-failure-limiter';
import type { ApiClient } from './clients.table';
import { tooManyFailedAuthentications } from './clients.errors';
import type { ClientsService } from './clients.service';

/**
 * Not `client`: Node sets that on every request (a deprecated alias of its
 * socket), so a check for it would pass requests nobody authenticated.
 */
export type AuthenticatedRequest = Request & { apiClient?: ApiClient };

/**
 * Authenticates every /v1 request but those in `keyless` (routes that carry
 * another proof, such as the provider's signed events) before its body is
 * read: a request without a valid key costs one indexed lookup, never a
 * parsed body, and is refused while the rest of a slow body is still on its
 * way. An address that keeps failing is refused without even the lookup.
 * Failures go to next(error), where the API answers them in the envelope.
 */
export function authenticateBeforeBody(
  clients: ClientsService,
  limiter: AuthFailureLimiter,
  keyless: readonly string[],
): (request: AuthenticatedRequest, response: Response, next: NextFunction) => void {
  return (request, _response, next) => {
    // Express matches routes whatever the letter case: /V1/PAYMENTS is /v1/payments.
    const path = request.path.replace(/\/+$/, '').toLowerCase();
    if (!path.startsWith('/v1/') || keyless.some((open) => open.toLowerCase() === path)) return next();
    const address = request.ip ?? 'unknown';
    const refusingFor = limiter.refusingForSeconds(address);
    if (refusingFor > 0) {
      return next(tooManyFailedAuthentications(refusingFor));
    }
    clients.authenticate(request.headersDistinct.authorization).then(
      (client) => {
        request.apiClient = client;
        next();
      },
      (error: unknown) => {
        if (error instanceof DomainError && error.code === ErrorCode.Unauthenticated) limiter.recordFailure(address);
        next(error);
      },
    );
  };
}
