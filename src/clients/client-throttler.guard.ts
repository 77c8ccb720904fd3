import { type CanActivate, type ExecutionContext, Injectable } from '@nestjs/common';
import type { Response } from 'express';
import type { AuthenticatedRequest } from './authentication.middleware';
import { ClientRateLimit } from './client-rate-limit';

/** The client's rate limit (see ClientRateLimit) on a route; runs after ApiKeyGuard. */
@Injectable()
export class ClientThrottlerGuard implements CanActivate {
  constructor(private readonly rateLimit: ClientRateLimit) {}

  canActivate(context: ExecutionContext): boolean {
    const http = context.switchToHttp();
    const client = http.getRequest<AuthenticatedRequest>().apiClient;
    if (!client) throw new Error('ClientThrottlerGuard must run after ApiKeyGuard');
    const { headers, refusal } = this.rateLimit.take(client.id);
    http.getResponse<Response>().set(headers);
    if (refusal) throw refusal;
    return true;
  }
}
