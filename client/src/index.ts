export { PaymentsClient, Payments, Refunds, Events, Webhooks, type PaymentsClientOptions } from './client.js';
export type { CreateOptions, GiveUpInfo, Operation, RequestOptions } from './transport.js';
export {
  ApiError,
  DeclineError,
  NetworkError,
  PaymentsClientError,
  PendingAtDeadlineError,
  RefundFailedError,
  WebhookVerificationError,
  type GiveUpReason,
} from './errors.js';
export { RetryBudget, type RetryBudgetOptions } from './retry-budget.js';
export type { BackoffOptions } from './backoff.js';
export { verifyWebhook, type VerifyOptions, type WebhookHeaders } from './webhooks.js';
export type {
  ErrorBody,
  ErrorCode,
  Event,
  EventListParams,
  EventType,
  Payment,
  PaymentCreateParams,
  PaymentListParams,
  Refund,
  RefundCreateParams,
  RefundListParams,
} from './types.js';
