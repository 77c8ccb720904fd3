import { type BackoffOptions, fullJitterMs } from './backoff.js';
import {
  ApiError,
  DeclineError,
  type GiveUpReason,
  NetworkError,
  PaymentsClientError,
  PendingAtDeadlineError,
  RefundFailedError,
} from './errors.js';
import { parseRetryAfterMs } from './retry-after.js';
import type { RetryBudget } from './retry-budget.js';
import type { ErrorBody, Payment, Refund } from './types.js';

/** Every call the client makes, as onGiveUp names it. */
export type Operation =
  | 'payments.create'
  | 'payments.retrieve'
  | 'payments.list'
  | 'refunds.create'
  | 'refunds.retrieve'
  | 'refunds.list'
  | 'events.retrieve'
  | 'events.list';

/** What onGiveUp is told, once per call that ends without a final answer, just before the call rejects. */
export interface GiveUpInfo {
  operation: Operation;
  method: 'GET' | 'POST';
  /** The path and query of the request, e.g. /v1/payments. */
  path: string;
  reason: GiveUpReason;
  /** Requests sent, the first included (0 when aborted before the first). */
  attempts: number;
  /** From the call's start to its give-up. */
  elapsedMs: number;
  /** The call's key, for a create: a create with it later resumes the same operation. */
  idempotencyKey?: string;
  /**
   * What the call rejects with: the last answer's ApiError, a NetworkError,
   * a PendingAtDeadlineError (whose cause is the last failure, if the last
   * attempt failed), or the AbortSignal's reason.
   */
  lastError: unknown;
}

/** Per call. */
export interface RequestOptions {
  /** Aborts the call: the attempt in flight and any wait. */
  signal?: AbortSignal;
  /** This call's deadline instead of the client's. */
  deadlineMs?: number;
}

export interface CreateOptions extends RequestOptions {
  /**
   * The Idempotency-Key of this operation (1 to 255 printable ASCII). Without
   * one the call makes a UUID, once, and every retry of the call sends it.
   * Pass your own, stored before the call, to carry the operation across a
   * restart of your process: the same key can never charge twice.
   */
  idempotencyKey?: string;
}

/** What the transport needs; PaymentsClient fills in the defaults. */
export interface TransportSettings {
  baseUrl: string;
  apiKey: string;
  maxRetries: number;
  deadlineMs: number;
  timeoutMs: number;
  backoff: BackoffOptions;
  budget: RetryBudget | undefined;
  onGiveUp: ((info: GiveUpInfo) => void) | undefined;
  fetch: typeof fetch;
  random: () => number;
}

/** One request of a call. */
export interface CallSpec {
  operation: Operation;
  method: 'GET' | 'POST';
  /** Path and query string. */
  path: string;
  body?: unknown;
  idempotencyKey?: string;
  /** For a create: the object its 202 carries, and its 402 embeds. */
  creates?: 'payment' | 'refund';
}

/** What one attempt came to. */
type AttemptOutcome =
  | { kind: 'done'; value: unknown }
  /** An answer retrying cannot change; `final` when it is the operation's outcome (a decline), not a give-up. */
  | { kind: 'refused'; error: PaymentsClientError; final: boolean }
  /** A failure that may pass if tried again. */
  | { kind: 'failed'; error: PaymentsClientError; retryAfterMs?: number }
  /** 202: the operation exists and is not final yet. */
  | { kind: 'pending'; object: Payment | Refund; retryAfterMs?: number }
  | { kind: 'aborted'; reason: unknown };

/** Thrown out of the loop with what the call rejects with. */
class GaveUp {
  constructor(
    readonly reason: GiveUpReason,
    readonly error: unknown,
  ) {}
}

/**
 * The retry discipline, for every request of one client instance:
 *
 * - one deadline per call, over every attempt and wait; each attempt waits
 *   at most min(timeoutMs, time left) for its answer;
 * - retried: a network error or timeout, 408, 409 idempotency_key_in_use,
 *   429 and 5xx (each retry counts against maxRetries and takes a token of
 *   the instance's budget); a 202 is polled, by sending the same request again,
 *   until the operation is final or the deadline passes (a poll is neither
 *   a retry nor paid for: the API is up and has said when to come back);
 * - never retried: any other answer (400, 401, 402, 404, 422, …);
 * - the wait before the next attempt is full-jitter exponential backoff, and
 *   never shorter than the answer's Retry-After; a wait that would end past
 *   the deadline is not started: the call gives up at once;
 * - a call that stops without a final answer tells onGiveUp, then rejects.
 */
export class Transport {
  constructor(private readonly settings: TransportSettings) {}

  async call<T>(spec: CallSpec, options: RequestOptions = {}): Promise<T> {
    const { settings } = this;
    const { signal } = options;
    const deadlineMs = options.deadlineMs ?? settings.deadlineMs;
    if (!(deadlineMs > 0)) throw new RangeError(`deadlineMs must be positive, got ${deadlineMs}`);
    const started = performance.now();
    const deadline = started + deadlineMs;
    let attempts = 0;
    let retries = 0;
    let pending: Payment | Refund | undefined;
    let lastFailure: PaymentsClientError | undefined;
    // Whether the last attempt failed, rather than answering 202.
    let failedLast = false;

    /** What the call rejects with when it stops now for `reason`. */
    const stopping = (reason: GiveUpReason): GaveUp => {
      if (pending) return new GaveUp(reason, new PendingAtDeadlineError(reason, pending, { cause: failedLast ? lastFailure : undefined }));
      return new GaveUp(reason, lastFailure ?? new NetworkError('timeout', `no answer within the deadline of ${deadlineMs} ms`));
    };

    settings.budget?.recordFirstAttempt();
    try {
      for (;;) {
        if (signal?.aborted) throw new GaveUp('aborted', signal.reason);
        const left = deadline - performance.now();
        if (left <= 0) throw stopping('deadline');
        attempts++;
        const outcome = await this.attempt(spec, Math.min(settings.timeoutMs, left), signal);
        switch (outcome.kind) {
          case 'done':
            return outcome.value as T;
          case 'aborted':
            throw new GaveUp('aborted', outcome.reason);
          case 'refused':
            if (outcome.final) throw outcome.error;
            throw new GaveUp('not_retryable', outcome.error);
          case 'pending':
            pending = outcome.object;
            failedLast = false;
            break;
          case 'failed':
            lastFailure = outcome.error;
            failedLast = true;
            if (retries >= settings.maxRetries) throw stopping('max_retries');
            break;
        }

        const waitMs = Math.max(fullJitterMs(attempts - 1, settings.backoff, settings.random), outcome.retryAfterMs ?? 0);
        if (waitMs >= deadline - performance.now()) throw stopping('deadline');
        if (outcome.kind === 'failed') {
          if (settings.budget && !settings.budget.trySpendRetry()) throw stopping('budget_exhausted');
          retries++;
        }
        if (!(await sleep(waitMs, signal))) throw new GaveUp('aborted', signal?.reason);
      }
    } catch (thrown) {
      const gaveUp = thrown instanceof GaveUp ? thrown : undefined;
      const error = gaveUp ? gaveUp.error : thrown;
      if (error instanceof PaymentsClientError) {
        error.attempts = attempts;
        if (spec.idempotencyKey !== undefined) error.idempotencyKey = spec.idempotencyKey;
      }
      if (gaveUp) this.tellGiveUp(spec, gaveUp.reason, attempts, performance.now() - started, error);
      throw error;
    }
  }

  private tellGiveUp(spec: CallSpec, reason: GiveUpReason, attempts: number, elapsedMs: number, lastError: unknown): void {
    const info: GiveUpInfo = {
      operation: spec.operation,
      method: spec.method,
      path: spec.path,
      reason,
      attempts,
      elapsedMs,
      ...(spec.idempotencyKey !== undefined && { idempotencyKey: spec.idempotencyKey }),
      lastError,
    };
    try {
      this.settings.onGiveUp?.(info);
    } catch {
      // The hook must not replace the call's own error; what it throws goes nowhere.
    }
  }

  /** One request, its answer read and classified; never throws. */
  private async attempt(spec: CallSpec, timeoutMs: number, signal: AbortSignal | undefined): Promise<AttemptOutcome> {
    const { settings } = this;
    const controller = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort();
    }, timeoutMs);
    const abort = () => controller.abort(signal?.reason);
    signal?.addEventListener('abort', abort, { once: true });
    const headers: Record<string, string> = { Authorization: `Bearer ${settings.apiKey}`, Accept: 'application/json' };
    if (spec.body !== undefined) headers['Content-Type'] = 'application/json';
    if (spec.idempotencyKey !== undefined) headers['Idempotency-Key'] = spec.idempotencyKey;
    try {
      const response = await settings.fetch(`${settings.baseUrl}${spec.path}`, {
        method: spec.method,
        headers,
        body: spec.body === undefined ? undefined : JSON.stringify(spec.body),
        // A redirect is nothing this API sends: it is reported, not followed.
        redirect: 'manual',
        signal: controller.signal,
      });
      const text = await response.text();
      return classify(spec, response.status, response.headers, text);
    } catch (error) {
      if (signal?.aborted) return { kind: 'aborted', reason: signal.reason };
      if (timedOut) return { kind: 'failed', error: new NetworkError('timeout', `no answer within ${Math.round(timeoutMs)} ms`) };
      return { kind: 'failed', error: new NetworkError('network', networkErrorMessage(error), { cause: error }) };
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', abort);
    }
  }
}

/** What an answer means for the call: the table of docs/api.md, as the client applies it. */
function classify(spec: CallSpec, status: number, headers: Headers, text: string): AttemptOutcome {
  const retryAfterMs = parseRetryAfterMs(headers.get('retry-after'));
  const requestId = headers.get('x-request-id') ?? undefined;
  const body = parseJson(text);

  if (status === 202 && spec.creates && isObject(body) && body.object === spec.creates && typeof body.id === 'string') {
    return { kind: 'pending', object: body as unknown as Payment | Refund, retryAfterMs };
  }
  if (status >= 200 && status < 300) {
    if (status !== 202 && isObject(body)) return { kind: 'done', value: body };
    return { kind: 'failed', error: new NetworkError('invalid_response', `HTTP ${status} without the expected JSON body`), retryAfterMs };
  }

  const envelope = isObject(body) && isObject(body.error) ? (body.error as Partial<ErrorBody> & Record<string, unknown>) : undefined;
  const meta = { requestId, retryAfterMs };
  if (status === 402 && envelope?.code === 'card_declined' && isObject(envelope.payment)) {
    return { kind: 'refused', error: new DeclineError(status, envelope, envelope.payment as unknown as Payment, meta), final: true };
  }
  if (status === 402 && envelope?.code === 'refund_failed' && isObject(envelope.refund)) {
    return { kind: 'refused', error: new RefundFailedError(status, envelope, envelope.refund as unknown as Refund, meta), final: true };
  }
  const error = new ApiError(status, envelope, meta);
  // 408: the request did not arrive whole in time, so nothing was done; 409 idempotency_key_in_use: the
  // key's first request is still running; 429: too fast; 5xx: the API or what it needs is unavailable.
  if (status === 408 || (status === 409 && envelope?.code === 'idempotency_key_in_use') || status === 429 || status >= 500) {
    return { kind: 'failed', error, retryAfterMs };
  }
  return { kind: 'refused', error, final: false };
}

/** Waits, or resolves false at once when the signal aborts. */
function sleep(ms: number, signal: AbortSignal | undefined): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve(false);
    const onAbort = () => {
      clearTimeout(timer);
      resolve(false);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve(true);
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * fetch's TypeError says only "fetch failed"; its cause has the code
 * (ECONNREFUSED, UND_ERR_SOCKET…). Read by shape: an error from another realm
 * (a VM context, a test runner's sandbox) is no `instanceof Error` here.
 */
function networkErrorMessage(error: unknown): string {
  const { message, cause } = (error ?? {}) as { message?: unknown; cause?: { code?: unknown; message?: unknown } };
  if (typeof message !== 'string') return String(error);
  if (typeof cause?.code === 'string') return `${message}: ${cause.code}`;
  if (typeof cause?.message === 'string') return `${message}: ${cause.message}`;
  return message;
}
