import { type CanActivate, type ExecutionContext, Injectable, createParamDecorator } from '@nestjs/common';
import type { Request } from 'express';
import type { ApiClient } from './clients.table';
import { ClientsService } from './clients.service';

type AuthenticatedRequest = Request & { client?: ApiClient };

/** Bearer auth for /v1: the client found here scopes everything the request can see. */
@Injectable()
export class ApiKeyGuard implements CanActivate {
  constructor(private readonly clients: ClientsService) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const request = context.switchToHttp().getRequest<AuthenticatedRequest>();
    request.client = await this.clients.authenticate(request.headersDistinct.authorization);
    return true;
  }
}

export const CurrentClient = createParamDecorator((_data: unknown, context: ExecutionContext): ApiClient => {
  const client = context.switchToHttp().getRequest<AuthenticatedRequest>().client;
  if (!client) throw new Error('CurrentClient used on a route without ApiKeyGuard');
  return client;
});
