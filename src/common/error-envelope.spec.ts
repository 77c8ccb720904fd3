import { QueryRunnerAlreadyReleasedError, QueryRunnerProviderAlreadyReleasedError } from 'typeorm';
import { errorReply, fromClientError, fromInfrastructureError, methodNotAllowed } from './error-envelope';
import { RetryableQueryError } from './retryable-query-error';
import { TransportErrorCode } from './transport-error';

describe('fromInfrastructureError', () => {
  it.each([
    ['a refused connection', Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' })],
    ['a terminated backend', { message: 'terminating connection due to administrator command', driverError: { code: '57P01' } }],
    ['a dropped socket', new Error('Connection terminated unexpectedly')],
    ['PgBouncer unable to reach the server', { message: 'pgbouncer cannot connect to server', driverError: { code: '08P01' } }],
    [
      'a write sent to a standby still in recovery',
      { message: 'cannot execute INSERT in a read-only transaction', driverError: { code: '25006' } },
    ],
    [
      'a query on a connection terminated as the pool handed it out',
      Object.assign(new Error('Client has encountered a connection error and is not queryable'), {
        driverError: new Error('Client has encountered a connection error and is not queryable'),
      }),
    ],
    ['a statement that outwaited its timeout', { message: 'canceling statement due to statement timeout', driverError: { code: '57014' } }],
    ['a statement in a transaction whose connection the server dropped', new QueryRunnerProviderAlreadyReleasedError()],
    ['the COMMIT of a transaction whose connection the server dropped', new QueryRunnerAlreadyReleasedError()],
    [
      'a transaction whose statement function was dropped under the process',
      new RetryableQueryError('SELECT 1', [], Object.assign(new Error('function stmt_x() does not exist'), { code: '42883' })),
    ],
  ])('answers 503 service_unavailable with Retry-After for %s', (_case, error) => {
    const transportError = fromInfrastructureError(error);

    expect(transportError?.code).toBe(TransportErrorCode.ServiceUnavailable);
    expect(transportError?.details.retryAfterSeconds).toBe(1);
  });

  it('leaves any other error alone, to be a 500', () => {
    expect(fromInfrastructureError(new Error('relation "payments" does not exist'))).toBeUndefined();
    expect(fromInfrastructureError({ driverError: { code: '23505' } })).toBeUndefined();
  });
});

describe('fromClientError', () => {
  it.each([
    ['HPE_HEADER_OVERFLOW', 431, 'request_headers_too_large'],
    ['HPE_CHUNK_EXTENSIONS_OVERFLOW', 413, 'body_too_large'],
    ['ERR_HTTP_REQUEST_TIMEOUT', 408, 'request_timeout'],
    ['HPE_INVALID_METHOD', 400, 'request_malformed'],
    [undefined, 400, 'request_malformed'],
  ])('answers %s with the status Node would, in the envelope', (code, status, errorCode) => {
    const reply = errorReply(fromClientError(code));

    expect(reply.status).toBe(status);
    expect(JSON.parse(reply.body)).toEqual({ error: { type: 'invalid_request_error', code: errorCode, message: expect.any(String) } });
  });
});

describe('methodNotAllowed', () => {
  it('is a 405 that names the methods in Allow', () => {
    const reply = errorReply(methodNotAllowed('DELETE', ['GET', 'HEAD', 'POST']));

    expect(reply.status).toBe(405);
    expect(reply.headers).toEqual({ Allow: 'GET, HEAD, POST' });
  });
});
