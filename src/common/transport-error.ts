import { CodedError } from './coded-error';

/**
 * Codes of the errors the HTTP layer raises around the services: Node's HTTP
 * parser, the body parser, routing, the rate limiter, an unreachable database,
 * and anything unexpected. No service throws these.
 */
export enum TransportErrorCode {
  RequestMalformed = 'request_malformed',
  RequestHeadersTooLarge = 'request_headers_too_large',
  RequestTimeout = 'request_timeout',
  ExpectationFailed = 'expectation_failed',
  BodyInvalidJson = 'body_invalid_json',
  BodyTooLarge = 'body_too_large',
  UnsupportedMediaType = 'unsupported_media_type',
  RouteNotFound = 'route_not_found',
  MethodNotAllowed = 'method_not_allowed',
  RateLimited = 'rate_limited',
  ServiceUnavailable = 'service_unavailable',
  Internal = 'internal_error',
}

export class TransportError extends CodedError<TransportErrorCode> {}
