import { type CanActivate, type ExecutionContext, Injectable, createParamDecorator } from '@nestjs/common';
import type { AuthenticatedRequest } from './authentication.middleware';
import { unauthenticated } from './clients.errors';
import type { ApiClient } from './clients.table';

/**
 * Marks a route as the client's: authenticateBeforeBody found the client
 * before the body was read. Fails closed: a route it did not authenticate
 * (a path left out by mistake) is a 401, never an anonymous request.
 */
@Injectable()
export class ApiKeyGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    if (!context.switchToHttp().getRequest<AuthenticatedRequest>().apiClient) {
      throw unauthenticated();
    }
    return true;
  }
}

export const CurrentClient = createParamDecorator((_data: unknown, context: ExecutionContext): ApiClient => {
  const client = context.switchToHttp().getRequest<AuthenticatedRequest>().apiClient;
  if (!client) throw new Error('CurrentClient used on a route without ApiKeyGuard');
  return client;
});
