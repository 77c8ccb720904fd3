import type { Response } from 'express';
import { ErrorCode } from '../common/domain-error';
import { strictMock } from '../common/strict-mock.fixture';
import { TransportErrorCode } from '../common/transport-error';
import { AuthFailureLimiter } from './auth-failure-limiter';
import { type AuthenticatedRequest, authenticateBeforeBody } from './authentication.middleware';
import { unauthenticated } from './clients.errors';
import type { ClientsService } from './clients.service';
import type { ApiClient } from './clients.table';

const CLIENT = { id: 'client-1', name: 'shop' } as ApiClient;

function requestTo(path: string, ip = '10.0.0.1'): AuthenticatedRequest {
  return { path, ip, headersDistinct: { authorization: ['Bearer sk_x'] } } as unknown as AuthenticatedRequest;
}

/** Runs the middleware once; resolves with what it passed to next(). */
function run(middleware: ReturnType<typeof authenticateBeforeBody>, request: AuthenticatedRequest): Promise<unknown> {
  return new Promise((resolve) => middleware(request, {} as Response, resolve));
}

describe('authenticateBeforeBody', () => {
  it('sets the client on a /v1 request whose key is valid', async () => {
    const clients = strictMock<ClientsService>('clients');
    clients.authenticate = jest.fn().mockResolvedValue(CLIENT);
    const request = requestTo('/v1/payments');

    const passed = await run(authenticateBeforeBody(clients, new AuthFailureLimiter(5, 60_000), []), request);

    expect(passed).toBeUndefined();
    expect(request.apiClient).toBe(CLIENT);
  });

  it('authenticates /v1 paths in any letter case, as Express routes them', async () => {
    const clients = strictMock<ClientsService>('clients');
    clients.authenticate = jest.fn().mockRejectedValue(unauthenticated());
    const middleware = authenticateBeforeBody(clients, new AuthFailureLimiter(5, 60_000), ['/v1/provider/events']);

    expect(await run(middleware, requestTo('/V1/PAYMENTS'))).toMatchObject({ code: ErrorCode.Unauthenticated });
    expect(await run(middleware, requestTo('/v1/Payments/pay_x'))).toMatchObject({ code: ErrorCode.Unauthenticated });
    expect(await run(middleware, requestTo('/V1/Provider/Events'))).toBeUndefined();
  });

  it('leaves paths outside /v1 and keyless paths alone', async () => {
    const clients = strictMock<ClientsService>('clients');
    const middleware = authenticateBeforeBody(clients, new AuthFailureLimiter(5, 60_000), ['/v1/provider/events']);

    expect(await run(middleware, requestTo('/health/live'))).toBeUndefined();
    expect(await run(middleware, requestTo('/v1/provider/events'))).toBeUndefined();
    expect(await run(middleware, requestTo('/v1/provider/events/'))).toBeUndefined();
  });

  it('passes a failed authentication on, and refuses the address without a lookup once it failed too often', async () => {
    const clients = strictMock<ClientsService>('clients');
    clients.authenticate = jest.fn().mockRejectedValue(unauthenticated());
    const middleware = authenticateBeforeBody(clients, new AuthFailureLimiter(2, 60_000), []);

    for (let i = 0; i < 2; i++) {
      expect(await run(middleware, requestTo('/v1/payments'))).toMatchObject({ code: ErrorCode.Unauthenticated });
    }
    const refused = await run(middleware, requestTo('/v1/payments'));
    const elsewhere = await run(middleware, requestTo('/v1/payments', '10.0.0.2'));

    expect(refused).toMatchObject({ code: TransportErrorCode.RateLimited, details: { retryAfterSeconds: 60 } });
    expect(elsewhere).toMatchObject({ code: ErrorCode.Unauthenticated });
    expect(clients.authenticate).toHaveBeenCalledTimes(3);
  });

  it('does not count a database failure as a failed authentication', async () => {
    const clients = strictMock<ClientsService>('clients');
    const down = new Error('connect ECONNREFUSED');
    clients.authenticate = jest.fn().mockRejectedValue(down);
    const limiter = new AuthFailureLimiter(1, 60_000);

    expect(await run(authenticateBeforeBody(clients, limiter, []), requestTo('/v1/payments'))).toBe(down);
    expect(limiter.refusingForSeconds('10.0.0.1')).toBe(0);
  });
});
