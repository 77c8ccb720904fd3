import type { ErrorBody, Payment, Refund } from './types.js';

/** Why a call stopped without a final answer; see GiveUpInfo. */
export type GiveUpReason =
  /** An answer that the same request would get again: 400, 401, 404, 409 (but idempotency_key_in_use), 422, … */
  | 'not_retryable'
  /** maxRetries retries were made and the last failed too. */
  | 'max_retries'
  /** The call's deadline passed, or the next attempt (backoff or Retry-After) would start after it. */
  | 'deadline'
  /** The client instance's retry budget had no token for the retry. */
  | 'budget_exhausted'
  /** The caller's AbortSignal fired. */
  | 'aborted';

/** Every error this package throws. */
export class PaymentsClientError extends Error {
  /** The call's Idempotency-Key (creates only), to carry the operation across a restart. */
  idempotencyKey?: string;
  /** Attempts the call made before it threw, the first included. */
  attempts = 0;

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** An error answer of the API: its status and the envelope `{"error":{type,code,message,param?,request_id?}}`. */
export class ApiError extends PaymentsClientError {
  /** The HTTP status. */
  readonly status: number;
  /** The error code, e.g. `parameter_invalid`; undefined when the body was not the API's envelope (a proxy's 502 page). */
  readonly code: ErrorBody['code'] | undefined;
  readonly type: ErrorBody['type'] | undefined;
  /** The request field at fault, for a 400. */
  readonly param: string | undefined;
  /** The API's request id (X-Request-Id), to quote when asking about this answer. */
  readonly requestId: string | undefined;
  /** What the answer's Retry-After asked for, in milliseconds. */
  readonly retryAfterMs: number | undefined;

  constructor(
    status: number,
    body: Partial<ErrorBody> | undefined,
    meta: { requestId?: string; retryAfterMs?: number } = {},
  ) {
    super(body?.message ? `${status} ${body.code ?? 'error'}: ${body.message}` : `HTTP ${status}`);
    this.status = status;
    this.code = body?.code;
    this.type = body?.type;
    this.param = body?.param;
    this.requestId = body?.request_id ?? meta.requestId;
    this.retryAfterMs = meta.retryAfterMs;
  }
}

/** 402 card_declined: the payment was made and failed, for good. */
export class DeclineError extends ApiError {
  constructor(
    status: number,
    body: Partial<ErrorBody>,
    /** The failed payment (`status: "failed"`, with its failure_code and failure_message). */
    readonly payment: Payment,
    meta: { requestId?: string } = {},
  ) {
    super(status, body, meta);
  }
}

/** 402 refund_failed: the provider refused the refund, for good. */
export class RefundFailedError extends ApiError {
  constructor(
    status: number,
    body: Partial<ErrorBody>,
    /** The failed refund (`status: "failed"`). */
    readonly refund: Refund,
    meta: { requestId?: string } = {},
  ) {
    super(status, body, meta);
  }
}

/**
 * No usable answer: the connection failed or was cut (`network`), no answer
 * within the attempt's timeout (`timeout`), or a success whose body was not
 * the JSON promised (`invalid_response`). For a create the request may have
 * been acted on; the retry with the same key finds out.
 */
export class NetworkError extends PaymentsClientError {
  constructor(
    readonly kind: 'network' | 'timeout' | 'invalid_response',
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/**
 * The call stopped while its payment (or refund) exists and is not final yet:
 * the API answered 202 and the call ran out of time before a final answer,
 * most often at its deadline (`reason: "deadline"`, which is also the reason
 * when the API's Retry-After, 60 s for a payment in review, is past the
 * deadline), or, after a 202, because a failure found no retry left. The
 * payment is not lost: the API finishes it (reconciliation, review), a create
 * with the same idempotency key resumes it, and a retrieve reads it.
 */
export class PendingAtDeadlineError extends PaymentsClientError {
  /** The pending (or requires_review) payment, for payments.create. */
  readonly payment: Payment | undefined;
  /** The pending (or requires_review) refund, for refunds.create. */
  readonly refund: Refund | undefined;

  constructor(
    readonly reason: GiveUpReason,
    object: Payment | Refund,
    options?: { cause?: unknown },
  ) {
    super(`${object.id} is still ${object.status} (${reason})`, options);
    this.payment = object.object === 'payment' ? object : undefined;
    this.refund = object.object === 'refund' ? object : undefined;
  }
}

/** webhooks.verify refused a delivery: a missing header, a bad or stale signature, a body that is not an event. */
export class WebhookVerificationError extends PaymentsClientError {}
