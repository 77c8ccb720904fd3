/**
 * What a failed provider attempt means for the next one. The table is the single
 * source of truth: the client classifies through it, tests and docs cite it.
 *
 * Why retrying a POST that may already have been processed is safe: a timeout, a
 * reset or a socket closed before the reply (the "lost reply": the provider
 * recorded the charge, then the connection died) all leave the charge possibly
 * made. The retry is safe ONLY because the provider idempotency key is
 * deterministic per payment, so the provider replays the charge it recorded
 * instead of making a second one. Without that key every such row would have to
 * be 'never'.
 */

/**
 * transient: may succeed if tried again; retried with backoff.
 * throttled: the provider asked us to slow down; retried, honouring Retry-After.
 * never: the same request would fail the same way.
 *
 * transient and throttled failures also count against the circuit breaker;
 * never does not: a definitive answer, even a 4xx, shows the provider is up.
 */
type Disposition = 'transient' | 'throttled' | 'never';

interface RetryRule {
  /** A Node/undici error code, "HTTP <status>", or a named case. */
  readonly failure: string;
  readonly disposition: Disposition;
  /** A Retry-After header on this answer sets the minimum wait before the retry. */
  readonly retryAfter?: true;
  readonly why: string;
}

export const RETRY_RULES = [
  // Transport failures before the request reached the provider.
  { failure: 'ECONNREFUSED', disposition: 'transient', why: 'connection refused' },
  { failure: 'ENOTFOUND', disposition: 'transient', why: 'DNS lookup failed' },
  { failure: 'EAI_AGAIN', disposition: 'transient', why: 'DNS lookup failed temporarily' },
  { failure: 'EHOSTUNREACH', disposition: 'transient', why: 'host unreachable' },
  { failure: 'ENETUNREACH', disposition: 'transient', why: 'network unreachable' },
  { failure: 'UND_ERR_CONNECT_TIMEOUT', disposition: 'transient', why: 'connect timed out' },
  // Transport failures after the request may have been processed: lost replies.
  { failure: 'ECONNRESET', disposition: 'transient', why: 'connection reset' },
  { failure: 'UND_ERR_SOCKET', disposition: 'transient', why: 'socket closed (hang-up)' },
  { failure: 'EPIPE', disposition: 'transient', why: 'broken pipe' },
  { failure: 'ECONNABORTED', disposition: 'transient', why: 'connection aborted' },
  { failure: 'ETIMEDOUT', disposition: 'transient', why: 'socket timed out' },
  { failure: 'UND_ERR_HEADERS_TIMEOUT', disposition: 'transient', why: 'no response headers in time' },
  { failure: 'UND_ERR_BODY_TIMEOUT', disposition: 'transient', why: 'response body stalled' },
  { failure: 'timeout', disposition: 'transient', why: 'no answer within the per-attempt timeout' },
  // Answers that say "not now".
  { failure: 'HTTP 500', disposition: 'transient', why: 'internal error' },
  { failure: 'HTTP 502', disposition: 'transient', why: 'bad gateway' },
  { failure: 'HTTP 503', disposition: 'transient', retryAfter: true, why: 'unavailable' },
  { failure: 'HTTP 504', disposition: 'transient', why: 'gateway timeout' },
  { failure: 'HTTP 429', disposition: 'throttled', retryAfter: true, why: 'too many requests' },
  // Answers and failures that a retry cannot change.
  { failure: 'HTTP 501', disposition: 'never', why: 'not implemented' },
  {
    failure: 'HTTP other',
    disposition: 'never',
    why: 'any other non-2xx (3xx, 4xx such as 400/409/422, other 5xx): a 4xx signals a bug on our side',
  },
  {
    failure: 'malformed body',
    disposition: 'never',
    why: 'a 2xx whose body is not a valid charge or refund: not trusted, the outcome stays unknown',
  },
  {
    failure: 'circuit open',
    disposition: 'never',
    why: 'the circuit breaker refused the attempt: nothing was sent this time',
  },
  {
    failure: 'other error',
    disposition: 'never',
    why: 'an unrecognised failure: not retried blindly, logged so it can be classified',
  },
] as const satisfies readonly RetryRule[];

type Failure = (typeof RETRY_RULES)[number]['failure'];

/** A failed attempt: the rule that classifies it, one line for logs, and the server's wait hint. */
export interface AttemptFailure {
  readonly rule: RetryRule;
  readonly reason: string;
  /** From Retry-After, on the answers whose rule honours it. */
  readonly retryAfterMs?: number;
}

const RULES = new Map<string, RetryRule>(RETRY_RULES.map((rule) => [rule.failure, rule]));

/** The rule for a named failure of the table. */
export function ruleFor(failure: Failure): RetryRule {
  return RULES.get(failure)!;
}

/** The rule for a non-2xx HTTP status (404 on a lookup is an answer, see the client). */
export function classifyStatus(status: number): RetryRule {
  return RULES.get(`HTTP ${status}`) ?? ruleFor('HTTP other');
}

/**
 * The rule for a thrown transport error, with a one-line description. fetch wraps
 * the cause ("fetch failed" → the socket error with its code), sometimes twice, and
 * a multi-address connect reports an AggregateError: the first known code wins.
 * Timeouts are not decided here: the client reads them from its own timeout
 * signal, which is exact whatever error the timeout surfaces as.
 */
export function classifyError(error: unknown): { rule: RetryRule; reason: string } {
  const chain: unknown[] = [];
  for (let e: unknown = error; e !== undefined && e !== null && chain.length < 8; ) {
    chain.push(e);
    e = e instanceof AggregateError ? e.errors[0] : (e as { cause?: unknown }).cause;
  }
  for (const e of chain) {
    const code = (e as { code?: unknown }).code;
    // Only upper-case codes, so an error can never select a named case like 'timeout'.
    const rule = typeof code === 'string' && ERROR_CODE.test(code) ? RULES.get(code) : undefined;
    if (rule) return { rule, reason: `${code}: ${e instanceof Error ? e.message : String(e)}` };
  }
  return { rule: ruleFor('other error'), reason: chain.map(describe).join(' <- ') };
}

const ERROR_CODE = /^[A-Z][A-Z0-9_]*$/;

function describe(e: unknown): string {
  return e instanceof Error ? `${e.name}: ${e.message}` : String(e);
}
