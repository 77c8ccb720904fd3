import { CodedError } from './coded-error';

/**
 * Stable codes of the errors services raise. A service throws a DomainError
 * and never an HTTP exception, so the worker and the commands can call the
 * same services; common/error-envelope.ts maps each code to a status once.
 */
export enum ErrorCode {
  ParameterInvalid = 'parameter_invalid',
  IdempotencyKeyMissing = 'idempotency_key_missing',
  IdempotencyKeyInvalid = 'idempotency_key_invalid',
  IdempotencyKeyReused = 'idempotency_key_reused',
  IdempotencyKeyInUse = 'idempotency_key_in_use',
  OrderAlreadyPaid = 'order_already_paid',
  CardDeclined = 'card_declined',
  RefundFailed = 'refund_failed',
  PaymentNotRefundable = 'payment_not_refundable',
  AmountTooLarge = 'amount_too_large',
  Unauthenticated = 'unauthenticated',
  NotFound = 'resource_missing',
  ProviderUnavailable = 'provider_unavailable',
  WebhookSignatureInvalid = 'webhook_signature_invalid',
  PaymentBusy = 'payment_busy',
  WebhookEndpointLimitReached = 'webhook_endpoint_limit_reached',
}

export class DomainError extends CodedError<ErrorCode> {}

/** The answers a retry can meet on its key: counted by idempotency_conflicts_total. */
export const IDEMPOTENCY_CONFLICT_CODES: readonly string[] = [ErrorCode.IdempotencyKeyInUse, ErrorCode.IdempotencyKeyReused];
