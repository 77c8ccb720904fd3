import { type ExecutionContext, Injectable } from '@nestjs/common';
import { ThrottlerGuard, type ThrottlerLimitDetail } from '@nestjs/throttler';
import { TransportError, TransportErrorCode } from '../common/transport-error';
import type { AuthenticatedRequest } from './authentication.middleware';

/**
 * Rate limits per API client (runs after ApiKeyGuard), counted in this
 * process's memory: payments keep flowing when Redis is down, and with N API
 * processes a client's ceiling is N times the limit. Its 429 is never stored
 * on an idempotency key: the key has not been read yet.
 */
@Injectable()
export class ClientThrottlerGuard extends ThrottlerGuard {
  protected override async getTracker(request: AuthenticatedRequest): Promise<string> {
    if (!request.apiClient) throw new Error('ClientThrottlerGuard must run after ApiKeyGuard');
    return request.apiClient.id;
  }

  /** One budget per client across every route, not one per route handler. */
  protected override generateKey(_context: ExecutionContext, tracker: string, throttlerName: string): string {
    return `${throttlerName}:${tracker}`;
  }

  protected override async throwThrottlingException(
    _context: ExecutionContext,
    detail: ThrottlerLimitDetail,
  ): Promise<void> {
    throw new TransportError(TransportErrorCode.RateLimited, 'Too many requests for this API key; slow down.', {
      retryAfterSeconds: Math.max(1, Math.ceil(detail.timeToBlockExpire)),
    });
  }
}
