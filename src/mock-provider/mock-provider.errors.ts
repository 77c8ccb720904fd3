/**
 * The stand-in processor's own error codes: it plays a third party, so it does
 * not share the API's codes. MockProviderErrorFilter maps each to a status.
 */
export enum MockProviderErrorCode {
  ParameterInvalid = 'parameter_invalid',
  ParameterUnknown = 'parameter_unknown',
  BodyInvalid = 'body_invalid',
  IdempotencyKeyMissing = 'idempotency_key_missing',
  IdempotencyKeyReused = 'idempotency_key_reused',
  ChargeNotFound = 'charge_not_found',
  ChargeNotRefundable = 'charge_not_refundable',
  AmountTooLarge = 'amount_too_large',
  RefundNotFound = 'refund_not_found',
  RouteNotFound = 'route_not_found',
  RateLimited = 'rate_limited',
  ServiceUnavailable = 'service_unavailable',
  DeadlineExceeded = 'deadline_exceeded',
  Internal = 'internal_error',
}

export class MockProviderError extends Error {
  constructor(
    readonly code: MockProviderErrorCode,
    message: string,
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
    this.name = 'MockProviderError';
  }
}
