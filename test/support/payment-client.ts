import { setTimeout as delay } from 'node:timers/promises';
import { backoffDelayMs } from '../../src/provider/retry-policy';
import type { Random } from './random';

/**
 * A client of POST /v1/payments (or /v1/refunds) that behaves as a careful
 * real one: a timeout per request, and on anything that does not settle the
 * payment or refund (a network error, a timeout, 5xx, 429, 409
 * idempotency_key_in_use, 202 pending) a retry with the same key and body
 * after a full-jitter backoff, until an answer is final or its attempts or
 * time run out. Used by the chaos run and the infrastructure-fault tests.
 */

/** One answer, or the lack of one, as the client saw it; `at` is when it was sent (epoch ms), `ms` how long it took. */
export type Reply =
  | {
      kind: 'http';
      status: number;
      /** The error code, for an error envelope. */
      code?: string;
      /** The payment the body names: the payment object's id, or the one embedded in a decline. */
      paymentId?: string;
      paymentStatus?: string;
      /** The refund the body names: the refund object's id, or the one embedded in a 402 refund_failed. */
      refundId?: string;
      refundStatus?: string;
      /** The amount of the payment or refund the body names. */
      amount?: number;
      replayed: boolean;
      at: number;
      ms: number;
    }
  | { kind: 'network'; error: string; at: number; ms: number };

export type HttpReply = Extract<Reply, { kind: 'http' }>;

export interface PayRequest {
  /** API base URLs; each attempt picks one, as a load balancer would. */
  urls: readonly string[];
  /** The route: /v1/payments unless said otherwise. */
  path?: '/v1/payments' | '/v1/refunds';
  apiKey: string;
  key: string;
  body: Record<string, unknown>;
}

export interface ClientRetryPolicy {
  timeoutMs: number;
  maxAttempts: number;
  /** Budget for all attempts and waits of one payment. */
  deadlineMs: number;
  backoffBaseMs: number;
  backoffCapMs: number;
  random: Random;
}

export interface PayResult {
  key: string;
  replies: Reply[];
  /** The answer the client stopped on; undefined when it gave up without one. */
  final?: HttpReply;
}

/** An answer that retrying with the same key cannot change. */
function isFinal(reply: Reply): reply is HttpReply {
  if (reply.kind !== 'http') return false;
  if (reply.status === 201 || reply.status === 402) return true;
  // requires_review waits on a provider re-check or a person: retrying soon changes nothing.
  if (reply.status === 202) return (reply.refundStatus ?? reply.paymentStatus) === 'requires_review';
  if (reply.status === 409) return reply.code !== 'idempotency_key_in_use';
  // Too many requests: the same request may pass later.
  if (reply.status === 429) return false;
  return reply.status >= 400 && reply.status < 500;
}

export async function payWithRetries(request: PayRequest, policy: ClientRetryPolicy): Promise<PayResult> {
  const replies: Reply[] = [];
  const deadline = Date.now() + policy.deadlineMs;
  for (let attempt = 0; attempt < policy.maxAttempts; attempt++) {
    const url = request.urls[Math.floor(policy.random() * request.urls.length)];
    const reply = await postOnce(url, request, Math.min(policy.timeoutMs, Math.max(1, deadline - Date.now())));
    replies.push(reply);
    if (isFinal(reply)) return { key: request.key, replies, final: reply };
    const backoff = { variant: 'full', baseMs: policy.backoffBaseMs, capMs: policy.backoffCapMs } as const;
    const waitMs = backoffDelayMs(backoff, attempt, policy.random);
    if (Date.now() + waitMs >= deadline) break;
    await delay(waitMs);
  }
  return { key: request.key, replies };
}

export async function postOnce(url: string, request: PayRequest, timeoutMs: number): Promise<Reply> {
  const started = Date.now();
  try {
    const response = await fetch(`${url}${request.path ?? '/v1/payments'}`, {
      method: 'POST',
      headers: {
        Authorization: `Bearer ${request.apiKey}`,
        'Idempotency-Key': request.key,
        'Content-Type': 'application/json',
      },
      body: JSON.stringify(request.body),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await response.text();
    return {
      kind: 'http',
      status: response.status,
      ...describeBody(text),
      replayed: response.headers.get('idempotent-replayed') === 'true',
      at: started,
      ms: Date.now() - started,
    };
  } catch (error) {
    return { kind: 'network', error: errorName(error), at: started, ms: Date.now() - started };
  }
}

interface BodyFacts {
  code?: string;
  paymentId?: string;
  paymentStatus?: string;
  refundId?: string;
  refundStatus?: string;
  amount?: number;
}

function describeBody(text: string): BodyFacts {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return {};
  }
  const record = (value: unknown) => (value && typeof value === 'object' ? (value as Record<string, unknown>) : undefined);
  const error = record(record(body)?.error);
  // A refund object, or the one a 402 refund_failed embeds; else a payment, or the one a decline embeds.
  const refund = error ? record(error.refund) : record(body)?.object === 'refund' ? record(body) : undefined;
  const payment = refund ? undefined : error ? record(error.payment) : record(body);
  const named = refund ?? payment;
  return {
    code: typeof error?.code === 'string' ? error.code : undefined,
    paymentId: typeof payment?.id === 'string' ? payment.id : undefined,
    paymentStatus: typeof payment?.status === 'string' ? payment.status : undefined,
    refundId: typeof refund?.id === 'string' ? refund.id : undefined,
    refundStatus: typeof refund?.status === 'string' ? refund.status : undefined,
    amount: typeof named?.amount === 'number' ? named.amount : undefined,
  };
}

function errorName(error: unknown): string {
  if (error instanceof Error) {
    const cause = (error as { cause?: { code?: unknown } }).cause;
    return typeof cause?.code === 'string' ? cause.code : error.name;
  }
  return String(error);
}
