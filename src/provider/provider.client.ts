import { Inject, Injectable, Logger, type OnModuleDestroy, Optional } from '@nestjs/common';
import { Agent, type Dispatcher, request } from 'undici';
import type { AppConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import { Metrics } from '../metrics/metrics';
import { ProviderBreaker } from './provider-breaker';
import { parseProviderCharge, type ProviderCharge } from './provider-charge';
import { type AttemptFailure, classifyError, classifyStatus, ruleFor } from './provider-errors';
import { parseProviderRefund, type ProviderRefund } from './provider-refund';
import { parseRetryAfterMs } from './retry-after';
import { type RetryBudget, RetryBudgets } from './retry-budget';
import { type GiveUpReason, type RetryClock, type RetryOutcome, SYSTEM_CLOCK, retry } from './retry-policy';

export type { ProviderCharge } from './provider-charge';
export type { ProviderRefund } from './provider-refund';

export interface CallOptions {
  /** The API client whose payment or refund this is: its circuit and retry budget are the ones used. */
  clientId: string;
  /** Sent as X-Request-Id and logged, so one request can be followed across services. */
  requestId?: string;
  /** Total attempts, first one included (default PROVIDER_MAX_ATTEMPTS). */
  maxAttempts?: number;
  /** Budget for the whole call, retries and waits included (default PROVIDER_DEADLINE_MS). */
  deadlineMs?: number;
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

export interface RefundInput {
  /**
   * Deterministic per refund, and not the payment's: every attempt for this
   * refund sends the same key, and another refund of the same charge another.
   */
  providerKey: string;
  /** The provider's id of the charge refunded (ch_…), as its answer gave it. */
  charge: string;
  /** In the charge's minor units; the provider refuses (422) more than is left of the charge. */
  amount: number;
  /** The refund id; the provider keeps it on the refund. */
  reference: string;
}

/** Why a call ended without an answer: the retry policy's reasons, or the open circuit. */
type GiveUp = GiveUpReason | 'breaker_open';

/** The provider could not give a trustworthy answer: a charge or refund may or may not exist. */
export interface UnknownOutcome {
  kind: 'unknown';
  /** 'breaker_open': the last try was refused by the circuit breaker and sent nothing. */
  gaveUp: GiveUp;
  reason: string;
  attempts: number;
}

export type ChargeResult = { kind: 'answered'; charge: ProviderCharge } | UnknownOutcome;

export type ChargeLookupResult =
  | { kind: 'found'; charge: ProviderCharge }
  | { kind: 'not_found' }
  | UnknownOutcome;

/**
 * An answered refund may still have failed or be pending: its status says.
 * 'unknown' means the refund may or may not have been made, so the caller
 * asks again with the same key rather than refund under a new one.
 */
export type RefundResult = { kind: 'answered'; refund: ProviderRefund } | UnknownOutcome;

/** not_found: the provider never received a refund under this key, so none was made. */
export type RefundLookupResult =
  | { kind: 'found'; refund: ProviderRefund }
  | { kind: 'not_found' }
  | UnknownOutcome;

/** Time and randomness, injectable so tests run without waiting. */
export interface ProviderClientDeps extends RetryClock {
  /** Epoch milliseconds, only to read an HTTP-date Retry-After. */
  wallClock(): number;
}

/** Optional Nest token for ProviderClientDeps; production provides nothing and gets real time. */
export const PROVIDER_CLIENT_DEPS = Symbol('PROVIDER_CLIENT_DEPS');

const DEFAULT_DEPS: ProviderClientDeps = { ...SYSTEM_CLOCK, wallClock: () => Date.now() };

/**
 * How long this attempt's caller will wait for the reply, in milliseconds. A
 * duration rather than an instant, so the provider needs no clock agreement
 * with us; it counts from when the request arrives.
 */
const DEADLINE_HEADER = 'X-Request-Deadline-Ms';

type Attempt<T> = { value: T } | { failure: AttemptFailure };

/** The provider's reply to one attempt: status, headers and the body, not read yet. */
type Reply = Dispatcher.ResponseData;

/** A call the circuit breaker refused: nothing was sent, or no more retries were. */
const REFUSED = {
  kind: 'gave_up',
  reason: 'not_retryable',
  detail: 'not retried',
  attempts: 0,
  last: { rule: ruleFor('circuit open'), reason: 'circuit breaker open, nothing sent' },
} as const satisfies RetryOutcome<never>;

/**
 * What the breaker counts, once per call: a call that ended without an answer
 * because the provider kept failing (transient or throttled, and the retries
 * a circuit cut short). An answer, a 4xx or a malformed body shows the
 * provider is up; a call that never got to try is nobody's failure.
 */
function failedForProvider(outcome: RetryOutcome<unknown>): boolean {
  if (outcome.kind === 'done' || !outcome.last) return false;
  return outcome.last.rule.disposition !== 'never' || outcome.last.rule.failure === 'circuit open';
}

/**
 * How one kind of provider object is read from a 2xx body: its parser, and
 * its name in the reason a malformed one gives.
 */
interface BodyReader<V> {
  what: 'charge' | 'refund';
  parse(body: unknown): V | undefined;
}

const CHARGE: BodyReader<ProviderCharge> = { what: 'charge', parse: parseProviderCharge };
const REFUND: BodyReader<ProviderRefund> = { what: 'refund', parse: parseProviderRefund };

/** The one answer of a lookup that carries no body: nothing was ever received under the key. */
const NOT_FOUND = { kind: 'not_found' } as const;

interface Call<T> {
  /** The provider_attempts_total label. */
  operation: 'create_charge' | 'get_charge' | 'create_refund' | 'get_refund';
  method: 'GET' | 'POST';
  path: string;
  providerKey: string;
  body?: string;
  /** Turns a response into an answer, or a failure to classify. */
  read(response: Reply): Promise<Attempt<T>>;
}

/**
 * The only caller of the payment provider. Every method returns an answer or
 * 'unknown'; provider trouble never throws. 'unknown' means a charge (or a
 * refund) may exist: the caller keeps the payment (or refund) pending and
 * asks again later under the same key.
 *
 * This is the API's one layer of in-request retries (the worker calls with
 * maxAttempts: 1: its ladder is its retry layer). The loop is retry-policy.ts:
 * up to maxAttempts attempts inside one overall deadline, full-jitter backoff
 * (PROVIDER_BACKOFF_BASE_MS, PROVIDER_BACKOFF_CAP_MS) or the provider's longer
 * Retry-After, each retry paid from the API client's retry budget. Each attempt
 * times out after min(PROVIDER_TIMEOUT_MS, time left) and tells the provider so
 * in X-Request-Deadline-Ms. The whole call, retries included, goes through the
 * client's circuit breaker once: refused before it starts, counted once when it
 * ends, and its retries stop if a circuit opens meanwhile. Which failures are
 * retried is the table in provider-errors.ts. Retrying a POST
 * whose reply was lost is safe only because every attempt for a payment (or a
 * refund) sends the same deterministic provider key: the provider replays,
 * never charges or refunds twice.
 */
@Injectable()
export class ProviderClient implements OnModuleDestroy {
  private readonly logger = new Logger(ProviderClient.name);
  private readonly deps: ProviderClientDeps;
  /**
   * The provider's connections, kept alive between calls. undici's request
   * rather than fetch: the same client underneath without the WHATWG
   * Request, Response and stream objects around it, a quarter of fetch's CPU
   * per call (docs/performance.md). It follows no redirect.
   */
  private readonly connections = new Agent();

  constructor(
    @InjectConfig() private readonly config: AppConfig,
    private readonly budgets: RetryBudgets,
    private readonly breaker: ProviderBreaker,
    private readonly metrics: Metrics,
    @Optional() @Inject(PROVIDER_CLIENT_DEPS) deps: Partial<ProviderClientDeps> = {},
  ) {
    this.deps = { ...DEFAULT_DEPS, ...deps };
  }

  async onModuleDestroy(): Promise<void> {
    await this.connections.close();
  }

  /** How long from now the provider's circuits refuse this client's calls: 0 when a call may go. */
  unavailableForMs(clientId: string): number {
    return this.breaker.refusingForMs(clientId);
  }

  createCharge(input: ChargeInput, opts: CallOptions): Promise<ChargeResult> {
    return this.call<ChargeResult>(
      {
        operation: 'create_charge',
        method: 'POST',
        path: '/charges',
        providerKey: input.providerKey,
        body: JSON.stringify({
          amount: input.amount,
          currency: input.currency,
          payment_method: input.paymentMethod,
          reference: input.reference,
        }),
        read: (response) => this.readAnswer(response, CHARGE, (charge) => ({ kind: 'answered', charge })),
      },
      opts,
    );
  }

  getCharge(providerKey: string, opts: CallOptions): Promise<ChargeLookupResult> {
    return this.call<ChargeLookupResult>(
      {
        operation: 'get_charge',
        method: 'GET',
        path: `/charges/${encodeURIComponent(providerKey)}`,
        providerKey,
        read: (response) => this.readLookup(response, CHARGE, (charge) => ({ kind: 'found', charge })),
      },
      opts,
    );
  }

  /**
   * Refunds `amount` of a charge. Any 4xx, the provider's 422s included
   * (more than is left of the charge, a charge not refundable, the key reused
   * with other parameters), is 'unknown' and not retried, as for a charge: it
   * means the two sides disagree, which the caller must not read as a refund
   * declined.
   */
  createRefund(input: RefundInput, opts: CallOptions): Promise<RefundResult> {
    return this.call<RefundResult>(
      {
        operation: 'create_refund',
        method: 'POST',
        path: '/refunds',
        providerKey: input.providerKey,
        body: JSON.stringify({ charge: input.charge, amount: input.amount, reference: input.reference }),
        read: (response) => this.readAnswer(response, REFUND, (refund) => ({ kind: 'answered', refund })),
      },
      opts,
    );
  }

  /** The refund made under the refund's provider key, as the provider holds it now. */
  getRefund(providerKey: string, opts: CallOptions): Promise<RefundLookupResult> {
    return this.call<RefundLookupResult>(
      {
        operation: 'get_refund',
        method: 'GET',
        path: `/refunds/${encodeURIComponent(providerKey)}`,
        providerKey,
        read: (response) => this.readLookup(response, REFUND, (refund) => ({ kind: 'found', refund })),
      },
      opts,
    );
  }

  private async call<T>(call: Call<T>, opts: CallOptions): Promise<T | UnknownOutcome> {
    const { timeoutMs, maxAttempts, deadlineMs, backoffBaseMs, backoffCapMs } = this.config.provider;
    const policy = {
      maxAttempts: opts.maxAttempts ?? maxAttempts,
      deadlineMs: opts.deadlineMs ?? deadlineMs,
      backoff: { variant: 'full', baseMs: backoffBaseMs, capMs: backoffCapMs },
    } as const;
    const budget = this.budgets.for(opts.clientId);
    const run = await this.breaker.run(
      opts.clientId,
      () =>
        retry(
          policy,
          // AbortSignal.timeout takes whole milliseconds; rounding up overshoots by < 1 ms.
          (leftMs) => this.attempt(call, Math.ceil(Math.min(timeoutMs, leftMs)), opts),
          {
            budget,
            onRetry: (attempt, waitMs, failure) => {
              this.metrics.providerRetries.inc();
              this.logger.debug(
                `Provider ${call.method} ${call.path} attempt ${attempt} failed (${failure.reason}); ` +
                  `retrying in ${Math.round(waitMs)} ms`,
              );
            },
          },
          this.deps,
        ),
      failedForProvider,
    );
    if (run === 'refused') return this.giveUp(call, opts, budget, REFUSED);
    const outcome = run.result;
    return outcome.kind === 'done' ? outcome.value : this.giveUp(call, opts, budget, outcome);
  }

  /**
   * One attempt. The call as a whole went through the circuit breaker; a
   * retry is not sent if a circuit has opened since (the provider is down, or
   * this client's payments keep failing).
   */
  private async attempt<T>(call: Call<T>, timeoutMs: number, opts: CallOptions): Promise<Attempt<T>> {
    if (this.breaker.opened(opts.clientId)) return { failure: REFUSED.last };
    const sent = await this.send(call, timeoutMs, opts);
    const outcome = 'value' in sent ? 'answered' : sent.failure.rule.disposition;
    this.metrics.providerAttempts.inc({ operation: call.operation, outcome });
    return sent;
  }

  private async send<T>(call: Call<T>, timeoutMs: number, opts: CallOptions): Promise<Attempt<T>> {
    const signal = AbortSignal.timeout(timeoutMs);
    const headers: Record<string, string> = { Accept: 'application/json', [DEADLINE_HEADER]: String(timeoutMs) };
    if (call.body !== undefined) headers['Content-Type'] = 'application/json';
    if (call.method === 'POST') headers['Idempotency-Key'] = call.providerKey;
    if (opts.requestId) headers['X-Request-Id'] = opts.requestId;
    try {
      // A redirect is not part of the provider's contract: it surfaces as a
      // non-2xx answer rather than replay a payment request somewhere else.
      const response = await request(`${this.config.provider.url}${call.path}`, {
        method: call.method,
        headers,
        body: call.body,
        signal,
        dispatcher: this.connections,
      });
      // The body is read under the same signal, so a reply that stalls halfway
      // still ends with the attempt's timeout.
      return await call.read(response);
    } catch (error) {
      // Decided from our own signal, not from the error: a timeout can surface as
      // a socket error mid-body.
      if (signal.aborted) {
        return { failure: { rule: ruleFor('timeout'), reason: `no answer within ${timeoutMs} ms` } };
      }
      return { failure: classifyError(error) };
    }
  }

  /** A create's reply: a 2xx is the answer, any other status a failure to classify. */
  private async readAnswer<V, T>(response: Reply, reader: BodyReader<V>, answer: (value: V) => T): Promise<Attempt<T>> {
    const ok = response.statusCode >= 200 && response.statusCode < 300;
    return ok ? this.readBody(response, reader, answer) : { failure: await this.statusFailure(response) };
  }

  /**
   * A lookup's reply: as a create's, and a 404 is an answer too: nothing was
   * ever received under the key, so nothing was made under it.
   */
  private async readLookup<V, T>(
    response: Reply,
    reader: BodyReader<V>,
    found: (value: V) => T,
  ): Promise<Attempt<T | typeof NOT_FOUND>> {
    if (response.statusCode === 404) {
      await response.body.dump();
      return { value: NOT_FOUND };
    }
    return this.readAnswer(response, reader, found);
  }

  /**
   * A 2xx body read as `reader` says, charge and refund alike, so both get the
   * same caps: no more than PROVIDER_MAX_BODY_BYTES is read, and a body too
   * long or that does not parse is a 'malformed body' failure, never an
   * answer, so the outcome stays unknown.
   */
  private async readBody<V, T>(response: Reply, reader: BodyReader<V>, answer: (value: V) => T): Promise<Attempt<T>> {
    const { maxBodyBytes } = this.config.provider;
    const text = await textWithin(response, maxBodyBytes);
    const value = text === undefined ? undefined : reader.parse(parseJson(text));
    if (value !== undefined) return { value: answer(value) };
    const body =
      text === undefined ? `a body over ${maxBodyBytes} bytes` : `a malformed ${reader.what}: ${snippet(text) || '(empty body)'}`;
    return { failure: { rule: ruleFor('malformed body'), reason: `HTTP ${response.statusCode} with ${body}` } };
  }

  private async statusFailure(response: Reply): Promise<AttemptFailure> {
    const rule = classifyStatus(response.statusCode);
    // The status already decides; the body only helps the log line.
    const text = (await textWithin(response, this.config.provider.maxBodyBytes).catch(() => '')) ?? '';
    return {
      rule,
      reason: `HTTP ${response.statusCode}${text ? ` ${snippet(text)}` : ''}`,
      retryAfterMs: rule.retryAfter
        ? parseRetryAfterMs(headerOf(response, 'retry-after') ?? null, this.deps.wallClock())
        : undefined,
    };
  }

  /** Fail loudly: one line with everything needed to find the payment and the cause. */
  private giveUp(
    call: Call<unknown>,
    opts: CallOptions,
    budget: RetryBudget,
    { reason: stoppedBy, detail, attempts, last }: Extract<RetryOutcome<unknown>, { kind: 'gave_up' }>,
  ): UnknownOutcome {
    const gaveUp: GiveUp = last?.rule.failure === 'circuit open' ? 'breaker_open' : stoppedBy;
    const reason = last ? `${last.reason} (${detail})` : detail;
    this.metrics.providerGiveUps.inc({ reason: gaveUp });
    if (gaveUp === 'budget_exhausted') this.metrics.providerRetryBudgetExhausted.inc();
    const entry = {
      msg:
        `Provider ${call.method} ${call.path} gave up after ${attempts} attempt(s), outcome unknown: ${reason}; ` +
        `provider key ${call.providerKey}, request id ${opts.requestId ?? 'none'}`,
      gaveUp,
      providerKey: call.providerKey,
      requestId: opts.requestId,
      clientId: opts.clientId,
      attempts,
      lastError: last?.reason,
      retryBudgetTokens: budget.tokens,
      circuit: this.breaker.states(opts.clientId),
    };
    // A non-retryable failure (a 4xx, a malformed answer) means a bug on one side.
    if (gaveUp === 'not_retryable') this.logger.error(entry);
    else this.logger.warn(entry);
    return { kind: 'unknown', gaveUp, reason, attempts };
  }
}

/** A header of the reply; the first, if it came more than once. */
function headerOf(response: Reply, name: string): string | undefined {
  const value = response.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/**
 * The body as text, or undefined when it is longer than `maxBytes`: no more
 * than that is ever read or held, whatever Content-Length says (a body may
 * have none, or lie). Decoded as UTF-8, as a JSON body is.
 */
async function textWithin(response: Reply, maxBytes: number): Promise<string | undefined> {
  if (Number(headerOf(response, 'content-length')) > maxBytes) {
    // Not read: destroyed, and its connection with it.
    response.body.destroy();
    return undefined;
  }
  const chunks: Buffer[] = [];
  let size = 0;
  // Leaving the loop early cancels the stream, so the rest is never read.
  for await (const chunk of response.body as AsyncIterable<Buffer>) {
    size += chunk.byteLength;
    if (size > maxBytes) return undefined;
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
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
