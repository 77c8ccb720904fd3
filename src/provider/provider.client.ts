import { setTimeout as delay } from 'node:timers/promises';
import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import type { AppConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import { backoffDelayMs, type Random } from './backoff';
import { parseProviderCharge, type ProviderCharge } from './provider-charge';
import { classifyError, classifyStatus, ruleFor, type RetryRule } from './provider-errors';
import { parseRetryAfterMs } from './retry-after';

export type { ProviderCharge } from './provider-charge';

export interface CallOptions {
  /** Sent as X-Request-Id and logged, so one request can be followed across services. */
  requestId?: string;
  /** Total attempts, first one included (default PROVIDER_MAX_ATTEMPTS). */
  maxAttempts?: number;
  /** Budget for the whole call, retries and waits included (default PROVIDER_DEADLINE_MS). */
  deadlineMs?: number;
  /** Aborting ends the current attempt or wait at once; the outcome is then 'unknown'. */
  signal?: AbortSignal;
}

export interface ChargeInput {
  /** Deterministic per payment: every attempt, now or by reconciliation, sends the same key. */
  providerKey: string;
  amount: number;
  currency: string;
  paymentMethod: string;
  /** The payment id; the provider keeps it on the charge. */
  reference: string;
}

/** The provider could not give a trustworthy answer: a charge may or may not exist. */
export interface UnknownOutcome {
  kind: 'unknown';
  reason: string;
  attempts: number;
}

export type ChargeResult = { kind: 'answered'; charge: ProviderCharge } | UnknownOutcome;

export type LookupResult =
  | { kind: 'found'; charge: ProviderCharge }
  | { kind: 'not_found' }
  | UnknownOutcome;

/** Time and randomness, injectable so tests run without waiting. */
export interface ProviderClientDeps {
  /** Monotonic milliseconds, for deadlines: immune to wall-clock jumps. */
  now(): number;
  /** Epoch milliseconds, only to read an HTTP-date Retry-After. */
  wallClock(): number;
  /** Resolves after `ms`, or earlier once `signal` aborts (never rejects for that). */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
  random: Random;
}

/** Optional Nest token for ProviderClientDeps; production provides nothing and gets real time. */
export const PROVIDER_CLIENT_DEPS = Symbol('PROVIDER_CLIENT_DEPS');

function abortableSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return delay(ms, undefined, { signal }).catch((error: unknown) => {
    if (!signal?.aborted) throw error;
  });
}

const DEFAULT_DEPS: ProviderClientDeps = {
  now: () => performance.now(),
  wallClock: () => Date.now(),
  sleep: abortableSleep,
  random: Math.random,
};

interface AttemptFailure {
  rule: RetryRule;
  reason: string;
  retryAfterMs?: number;
}

type Attempt<T> = { answer: T } | { failure: AttemptFailure };

interface Call<T> {
  method: 'GET' | 'POST';
  path: string;
  providerKey: string;
  body?: string;
  /** Turns a response into an answer, or a failure to classify. */
  read(response: Response): Promise<Attempt<T>>;
}

/**
 * The only caller of the payment provider. Every method returns an answer or
 * 'unknown'; provider trouble never throws. 'unknown' means a charge may exist:
 * the caller keeps the payment pending and reconciliation asks again later.
 *
 * Retry policy: up to maxAttempts attempts inside one overall deadline; each
 * attempt times out after min(PROVIDER_TIMEOUT_MS, time left). Between attempts,
 * full-jitter backoff (PROVIDER_BACKOFF_BASE_MS, PROVIDER_BACKOFF_CAP_MS), or the
 * provider's Retry-After on 429/503 when it is longer. A wait that would end past
 * the deadline is not started: the call gives up at once. Which failures are
 * retried is the table in provider-errors.ts.
 */
@Injectable()
export class ProviderClient {
  private readonly logger = new Logger(ProviderClient.name);
  private readonly deps: ProviderClientDeps;

  constructor(
    @InjectConfig() private readonly config: AppConfig,
    @Optional() @Inject(PROVIDER_CLIENT_DEPS) deps: Partial<ProviderClientDeps> = {},
  ) {
    this.deps = { ...DEFAULT_DEPS, ...deps };
  }

  createCharge(input: ChargeInput, opts: CallOptions = {}): Promise<ChargeResult> {
    return this.call<ChargeResult>(
      {
        method: 'POST',
        path: '/charges',
        providerKey: input.providerKey,
        body: JSON.stringify({
          amount: input.amount,
          currency: input.currency,
          payment_method: input.paymentMethod,
          reference: input.reference,
        }),
        read: async (response) =>
          response.ok
            ? this.readCharge(response, (charge) => ({ kind: 'answered', charge }))
            : { failure: await this.statusFailure(response) },
      },
      opts,
    );
  }

  getCharge(providerKey: string, opts: CallOptions = {}): Promise<LookupResult> {
    return this.call<LookupResult>(
      {
        method: 'GET',
        path: `/charges/${encodeURIComponent(providerKey)}`,
        providerKey,
        read: async (response) => {
          if (response.ok) return this.readCharge(response, (charge) => ({ kind: 'found', charge }));
          if (response.status === 404) {
            await response.body?.cancel();
            return { answer: { kind: 'not_found' } };
          }
          return { failure: await this.statusFailure(response) };
        },
      },
      opts,
    );
  }

  private async call<T>(call: Call<T>, opts: CallOptions): Promise<T | UnknownOutcome> {
    const { timeoutMs, backoffBaseMs, backoffCapMs } = this.config.provider;
    const maxAttempts = opts.maxAttempts ?? this.config.provider.maxAttempts;
    const deadlineMs = opts.deadlineMs ?? this.config.provider.deadlineMs;
    // A caller's bug, not provider trouble: NaN here would mean retrying until the deadline.
    if (!Number.isInteger(maxAttempts) || maxAttempts < 1) {
      throw new RangeError(`maxAttempts must be a positive integer, got ${maxAttempts}`);
    }
    if (!(deadlineMs > 0)) throw new RangeError(`deadlineMs must be positive, got ${deadlineMs}`);
    const deadline = this.deps.now() + deadlineMs;
    const giveUp = (attempts: number, why: string, last?: AttemptFailure) =>
      this.giveUp(call, opts, attempts, why, last);

    let last: AttemptFailure | undefined;
    for (let attempts = 0; ; ) {
      if (opts.signal?.aborted) return giveUp(attempts, 'aborted by the caller', last);
      const left = deadline - this.deps.now();
      if (left <= 0) return giveUp(attempts, 'deadline reached', last);

      attempts++;
      // AbortSignal.timeout takes whole milliseconds; rounding up overshoots by < 1 ms.
      const outcome = await this.attempt(call, Math.ceil(Math.min(timeoutMs, left)), opts);
      if ('answer' in outcome) return outcome.answer;
      last = outcome.failure;

      if (last.rule.disposition === 'never') return giveUp(attempts, 'not retried', last);
      if (attempts >= maxAttempts) return giveUp(attempts, `${attempts} of ${maxAttempts} attempts used`, last);
      const backoffMs = backoffDelayMs(
        { variant: 'full', baseMs: backoffBaseMs, capMs: backoffCapMs },
        attempts - 1,
        undefined,
        this.deps.random,
      );
      const waitMs = Math.max(backoffMs, last.retryAfterMs ?? 0);
      const leftNow = deadline - this.deps.now();
      // Never sleep past the deadline: waiting only to give up later helps nobody.
      const wait = `${Math.round(waitMs)} ms`;
      if (waitMs >= leftNow) {
        return giveUp(attempts, `next attempt due in ${wait}, only ${Math.round(leftNow)} ms left`, last);
      }
      this.logger.debug(
        `Provider ${call.method} ${call.path} attempt ${attempts} failed (${last.reason}); retrying in ${wait}`,
      );
      await this.deps.sleep(waitMs, opts.signal);
    }
  }

  private async attempt<T>(call: Call<T>, timeoutMs: number, opts: CallOptions): Promise<Attempt<T>> {
    const timeout = AbortSignal.timeout(timeoutMs);
    const signal = opts.signal ? AbortSignal.any([timeout, opts.signal]) : timeout;
    const headers: Record<string, string> = { Accept: 'application/json' };
    if (call.body !== undefined) headers['Content-Type'] = 'application/json';
    if (call.method === 'POST') headers['Idempotency-Key'] = call.providerKey;
    if (opts.requestId) headers['X-Request-Id'] = opts.requestId;
    try {
      const response = await fetch(`${this.config.provider.url}${call.path}`, {
        method: call.method,
        headers,
        body: call.body,
        signal,
        // A redirect is not part of the provider's contract: surface it as a non-2xx
        // answer rather than replay a payment request somewhere else.
        redirect: 'manual',
      });
      // The body is read under the same signal, so a reply that stalls halfway
      // still ends with the attempt's timeout.
      return await call.read(response);
    } catch (error) {
      // Decided from our own signals, not from the error: the caller may abort with
      // any reason, and a timeout can surface as a socket error mid-body.
      if (opts.signal?.aborted) return { failure: { rule: ruleFor('aborted'), reason: 'aborted by the caller' } };
      if (timeout.aborted) {
        return { failure: { rule: ruleFor('timeout'), reason: `no answer within ${timeoutMs} ms` } };
      }
      return { failure: classifyError(error) };
    }
  }

  private async readCharge<T>(response: Response, answer: (charge: ProviderCharge) => T): Promise<Attempt<T>> {
    const text = await response.text();
    const charge = parseProviderCharge(parseJson(text));
    if (charge) return { answer: answer(charge) };
    const reason = `HTTP ${response.status} with a malformed charge: ${snippet(text) || '(empty body)'}`;
    return { failure: { rule: ruleFor('malformed body'), reason } };
  }

  private async statusFailure(response: Response): Promise<AttemptFailure> {
    const rule = classifyStatus(response.status);
    // The status already decides; the body only helps the log line.
    const text = await response.text().catch(() => '');
    return {
      rule,
      reason: `HTTP ${response.status}${text ? ` ${snippet(text)}` : ''}`,
      retryAfterMs: rule.retryAfter
        ? parseRetryAfterMs(response.headers.get('retry-after'), this.deps.wallClock())
        : undefined,
    };
  }

  /** Fail loudly: one line with everything needed to find the payment and the cause. */
  private giveUp(
    call: Call<unknown>,
    opts: CallOptions,
    attempts: number,
    why: string,
    last?: AttemptFailure,
  ): UnknownOutcome {
    const reason = last ? `${last.reason} (${why})` : why;
    const entry = {
      msg:
        `Provider ${call.method} ${call.path} gave up after ${attempts} attempt(s), outcome unknown: ${reason}; ` +
        `provider key ${call.providerKey}, request id ${opts.requestId ?? 'none'}`,
      providerKey: call.providerKey,
      requestId: opts.requestId,
      attempts,
      lastError: last?.reason,
    };
    // A non-retryable failure (a 4xx, a malformed answer) means a bug on one side.
    if (last?.rule.disposition === 'never' && last.rule.failure !== 'aborted') this.logger.error(entry);
    else this.logger.warn(entry);
    return { kind: 'unknown', reason, attempts };
  }
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** A provider body on one bounded line, for reasons and log lines. */
function snippet(text: string): string {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length > 200 ? `${line.slice(0, 200)}…` : line;
}
