import type { NextFunction, Request, Response } from 'express';
import { DomainError, ErrorCode } from '../common/domain-error';
import type { AuthFailureLimiter } from './auth-failure-limiter';
import type { ApiClient } from './clients.table';
import { tooManyFailedAuthentications } from './clients.errors';
import type { ClientsService } from './clients.service';

export type AuthenticatedRequest = Request & { client?: ApiClient };

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
    const path = request.path.replace(/\/+$/, '');
    if (!path.startsWith('/v1/') || keyless.includes(path)) return next();
    const address = request.ip ?? 'unknown';
    const refusingFor = limiter.refusingForSeconds(address);
    if (refusingFor > 0) {
      return next(tooManyFailedAuthentications(refusingFor));
    }
    clients.authenticate(request.headersDistinct.authorization).then(
      (client) => {
        request.client = client;
        next();
      },
      (error: unknown) => {
        if (error instanceof DomainError && error.code === ErrorCode.Unauthenticated) limiter.recordFailure(address);
        next(error);
      },
    );
  };
}
