import { HttpException, HttpStatus } from '@nestjs/common';
import { QueryRunnerAlreadyReleasedError, QueryRunnerProviderAlreadyReleasedError } from 'typeorm';
import { DomainError, ErrorCode } from './domain-error';
import type { HttpReply } from './http-reply';
import { RetryableQueryError } from './retryable-query-error';
import { TransportError, TransportErrorCode } from './transport-error';

/** Every error a client can see, whichever layer raised it. */
type ApiError = DomainError | TransportError;

type ErrorType =
  | 'invalid_request_error'
  | 'idempotency_error'
  | 'authentication_error'
  | 'card_error'
  | 'rate_limit_error'
  | 'api_error';

/** The one place error codes become HTTP. Exhaustive: a new code fails to compile until mapped. */
function statusAndType(code: ErrorCode | TransportErrorCode): [number, ErrorType] {
  switch (code) {
    case ErrorCode.ParameterInvalid:
    case TransportErrorCode.RequestMalformed:
    case TransportErrorCode.BodyInvalidJson:
    case ErrorCode.IdempotencyKeyMissing:
    case ErrorCode.IdempotencyKeyInvalid:
    case ErrorCode.AmountTooLarge:
    case ErrorCode.WebhookSignatureInvalid:
    case ErrorCode.WebhookEndpointLimitReached:
      return [400, 'invalid_request_error'];
    case TransportErrorCode.RequestTimeout:
      return [408, 'invalid_request_error'];
    case TransportErrorCode.BodyTooLarge:
      return [413, 'invalid_request_error'];
    case TransportErrorCode.ExpectationFailed:
      return [417, 'invalid_request_error'];
    case TransportErrorCode.UnsupportedMediaType:
      return [415, 'invalid_request_error'];
    case ErrorCode.Unauthenticated:
      return [401, 'authentication_error'];
    case ErrorCode.NotFound:
    case TransportErrorCode.RouteNotFound:
      return [404, 'invalid_request_error'];
    case TransportErrorCode.MethodNotAllowed:
      return [405, 'invalid_request_error'];
    case TransportErrorCode.RequestHeadersTooLarge:
      return [431, 'invalid_request_error'];
    case TransportErrorCode.RateLimited:
      return [429, 'rate_limit_error'];
    case ErrorCode.IdempotencyKeyInUse:
      return [409, 'idempotency_error'];
    case ErrorCode.OrderAlreadyPaid:
    case ErrorCode.PaymentNotRefundable:
      return [409, 'invalid_request_error'];
    case ErrorCode.PaymentBusy:
      return [409, 'api_error'];
    case ErrorCode.IdempotencyKeyReused:
      return [422, 'idempotency_error'];
    case ErrorCode.CardDeclined:
    case ErrorCode.RefundFailed:
      return [402, 'card_error'];
    case ErrorCode.ProviderUnavailable:
    case TransportErrorCode.ServiceUnavailable:
      return [503, 'api_error'];
    case TransportErrorCode.Internal:
      return [500, 'api_error'];
  }
}

/** A failure of ours rather than of the request: its envelope carries the request id of the log line. */
export function isServerError(error: ApiError): boolean {
  return statusAndType(error.code)[0] >= 500;
}

/**
 * The error as sent: `{"error":{"type","code","message","param"?, ...extra}}`,
 * with Retry-After when the error says when to come back and Allow when it
 * names the methods that would have been answered.
 */
export function errorReply(error: ApiError, extra: Record<string, unknown> = {}): HttpReply {
  const [status, type] = statusAndType(error.code);
  const { param, retryAfterSeconds, allow } = error.details;
  const envelope = { error: { type, code: error.code, message: error.message, ...(param !== undefined && { param }), ...extra } };
  const headers: Record<string, string> = {
    ...(retryAfterSeconds !== undefined && { 'Retry-After': String(retryAfterSeconds) }),
    ...(allow !== undefined && { Allow: allow.join(', ') }),
  };
  return { status, body: JSON.stringify(envelope), headers };
}

/** A known path asked with a method none of its routes answers. */
export function methodNotAllowed(method: string, allow: readonly string[]): TransportError {
  return new TransportError(TransportErrorCode.MethodNotAllowed, `${method} is not allowed here; use ${allow.join(', ')}.`, {
    allow,
  });
}

/**
 * What Node's HTTP parser refused (the `code` of a server's clientError), with
 * the status Node itself would have answered.
 */
export function fromClientError(code: string | undefined): TransportError {
  switch (code) {
    case 'HPE_HEADER_OVERFLOW':
      return new TransportError(TransportErrorCode.RequestHeadersTooLarge, 'The request headers are too large.');
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW':
      return new TransportError(TransportErrorCode.BodyTooLarge, 'The request body is too large.');
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return new TransportError(TransportErrorCode.RequestTimeout, 'The request was not received in time.');
    default:
      return new TransportError(TransportErrorCode.RequestMalformed, 'The request is not valid HTTP.');
  }
}

/** Nest's own exceptions (unknown route, wrong method, ...) in our codes. */
export function fromHttpException(exception: HttpException): ApiError {
  switch (exception.getStatus()) {
    case HttpStatus.NOT_FOUND:
      return new TransportError(TransportErrorCode.RouteNotFound, 'No such route.');
    case HttpStatus.PAYLOAD_TOO_LARGE:
      return new TransportError(TransportErrorCode.BodyTooLarge, 'The request body is too large.');
    case HttpStatus.UNSUPPORTED_MEDIA_TYPE:
      return new TransportError(TransportErrorCode.UnsupportedMediaType, 'Send the body as application/json.');
    case HttpStatus.UNAUTHORIZED:
      return new DomainError(ErrorCode.Unauthenticated, 'Authentication required.');
    default:
      return exception.getStatus() < 500
        ? new DomainError(ErrorCode.ParameterInvalid, 'The request is invalid.')
        : new TransportError(TransportErrorCode.Internal, 'An unexpected error occurred.');
  }
}

/** Errors the body parser raises before any route runs. */
export function fromBodyParserError(error: unknown): TransportError | undefined {
  const type = (error as { type?: unknown } | null)?.type;
  switch (type) {
    case 'entity.parse.failed':
      return new TransportError(TransportErrorCode.BodyInvalidJson, 'The request body is not valid JSON.');
    case 'entity.too.large':
      return new TransportError(TransportErrorCode.BodyTooLarge, 'The request body is too large.');
    case 'encoding.unsupported':
    case 'charset.unsupported':
      return new TransportError(TransportErrorCode.UnsupportedMediaType, 'Send the body as UTF-8 JSON.');
    default:
      return undefined;
  }
}

/** Postgres SQLSTATEs and socket errors that mean "the database is away", not "the request is wrong". */
const UNAVAILABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  '57P01', // admin_shutdown
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now
  '08000', // connection_exception
  '08001', // sqlclient_unable_to_establish_sqlconnection
  '08003', // connection_does_not_exist
  '08006', // connection_failure
  '08P01', // protocol_violation: what PgBouncer answers when it cannot reach the server, or a query waited too long for one
  '53300', // too_many_connections
  // read_only_sql_transaction: a write reached a server in recovery (a standby
  // a pooler was pointed at before its promotion ended) or one an operator set
  // read-only; the same request succeeds on the primary.
  '25006',
  '40001', // serialization_failure
  '40P01', // deadlock_detected
  // query_canceled: a statement that outwaited statement_timeout (behind a
  // lock a migration holds, or an overloaded server) or was cancelled by an
  // operator; it wrote nothing, and the same request can succeed later.
  '57014',
]);

/**
 * A database that is down or restarting is answered with 503 and Retry-After:
 * the client's retry (same key) is safe and will succeed once it is back.
 */
export function fromInfrastructureError(error: unknown): TransportError | undefined {
  const candidate = error as { code?: unknown; driverError?: { code?: unknown }; message?: unknown } | null;
  const code = candidate?.driverError?.code ?? candidate?.code;
  const message = typeof candidate?.message === 'string' ? candidate.message : '';
  if (
    (typeof code === 'string' && UNAVAILABLE_CODES.has(code)) ||
    // pg's words for a connection that died before or between queries
    // (a backend terminated as it was handed out): the query is never sent.
    /Connection terminated|timeout exceeded when trying to connect|is not queryable/i.test(message) ||
    // TypeORM releases a transaction's connection when the server drops it
    // (a restart, a terminated backend); the transaction's next statement, or
    // its COMMIT, then fails with one of these instead of the socket error.
    error instanceof QueryRunnerProviderAlreadyReleasedError ||
    error instanceof QueryRunnerAlreadyReleasedError ||
    error instanceof RetryableQueryError
  ) {
    return new TransportError(TransportErrorCode.ServiceUnavailable, 'The service is temporarily unavailable; retry later.', {
      retryAfterSeconds: 1,
    });
  }
  return undefined;
}
