import { IncomingMessage } from 'node:http';
import { Socket } from 'node:net';
import type { ExecutionContext } from '@nestjs/common';
import { ErrorCode } from '../common/domain-error';
import { ApiKeyGuard } from './api-key.guard';
import type { AuthenticatedRequest } from './authentication.middleware';
import type { ApiClient } from './clients.table';

function contextFor(request: IncomingMessage | AuthenticatedRequest): ExecutionContext {
  return { switchToHttp: () => ({ getRequest: () => request }) } as unknown as ExecutionContext;
}

describe('ApiKeyGuard', () => {
  it('refuses a request the middleware did not authenticate, though Node gives every request a `client` (its socket)', () => {
    const request = new IncomingMessage(new Socket());

    expect(() => new ApiKeyGuard().canActivate(contextFor(request))).toThrow(
      expect.objectContaining({ code: ErrorCode.Unauthenticated }),
    );
  });

  it('lets through a request the middleware authenticated', () => {
    const request = Object.assign(new IncomingMessage(new Socket()), { apiClient: { id: 'client-1' } as ApiClient });

    expect(new ApiKeyGuard().canActivate(contextFor(request as AuthenticatedRequest))).toBe(true);
  });
});
