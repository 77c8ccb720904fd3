/**
 * Stable error codes of the API. Services throw DomainError with one of these;
 * the HTTP layer maps each code to a status and type in one exhaustive switch
 * (common/error-envelope.ts), so the worker can call the same services.
 */
export enum ErrorCode {
  ParameterInvalid = 'parameter_invalid',
  BodyInvalidJson = 'body_invalid_json',
  BodyTooLarge = 'body_too_large',
  IdempotencyKeyMissing = 'idempotency_key_missing',
  IdempotencyKeyInvalid = 'idempotency_key_invalid',
  IdempotencyKeyReused = 'idempotency_key_reused',
  IdempotencyKeyInUse = 'idempotency_key_in_use',
  OrderAlreadyPaid = 'order_already_paid',
  CardDeclined = 'card_declined',
  Unauthenticated = 'unauthenticated',
  RateLimited = 'rate_limited',
  NotFound = 'resource_missing',
  RouteNotFound = 'route_not_found',
  UnsupportedMediaType = 'unsupported_media_type',
  ProviderUnavailable = 'provider_unavailable',
  ServiceUnavailable = 'service_unavailable',
  Internal = 'internal_error',
}

export class DomainError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details: { param?: string; retryAfterSeconds?: number } = {},
  ) {
    super(message);
    this.name = 'DomainError';
  }
}
