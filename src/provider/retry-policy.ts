import { setTimeout as delay } from 'node:timers/promises';
import type { AttemptFailure } from './provider-errors';
import type { RetryBudget } from './retry-budget';

/**
 * The one retry policy of every provider call: how long to wait between
 * attempts, how many to make and when to stop. The API's provider client runs
 * its in-request retries through `retry` with full jitter, the reconciliation
 * worker spaces its ladder with `backoffDelayMs` with equal jitter, and the
 * retry lab (scripts/sim.ts) reproduces the seeds' figures with both, so a
 * figure in docs/retries.md is a figure of this code. The variants only the lab
 * compares against live with it, in scripts/sim/backoff-variants.ts.
 *
 * Backoff formulas after the AWS Architecture Blog article "Exponential Backoff
 * And Jitter". Numbering: `retry` is the 0-based index of the retry being
 * scheduled, so the wait before attempt 2 is retry 0, whose exponential
 * ceiling is min(cap, base * 2^0) = min(cap, base).
 */

interface BackoffPolicy {
  readonly variant: 'full' | 'equal';
  readonly baseMs: number;
  readonly capMs: number;
}

/** Capped exponential ceiling: min(cap, base * 2^retry). */
export function exponentialMs(retry: number, baseMs: number, capMs: number): number {
  if (!Number.isInteger(retry) || retry < 0) {
    throw new RangeError(`retry must be a non-negative integer, got ${retry}`);
  }
  // 2^1023 is the largest finite power of two: a larger exponent would give
  // Infinity, and 0 * Infinity (a zero base) would be NaN instead of 0.
  return Math.min(capMs, baseMs * 2 ** Math.min(retry, 1023));
}

/**
 * How long to wait before retry number `retry` (0-based), with
 * e = min(cap, base * 2^retry):
 *
 * - full: random(0, e).
 * - equal: e/2 + random(0, e/2).
 *
 * random(a, b) is uniform on [a, b): a + random() * (b - a), with `random`
 * uniform on [0, 1) like Math.random.
 */
export function backoffDelayMs(policy: BackoffPolicy, retry: number, random: () => number = Math.random): number {
  const e = exponentialMs(retry, policy.baseMs, policy.capMs);
  switch (policy.variant) {
    case 'full':
      return random() * e;
    case 'equal':
      return e / 2 + random() * (e / 2);
  }
}

export interface RetryPolicy {
  /** Total attempts, the first one included. */
  readonly maxAttempts: number;
  /** For the whole call: every attempt and every wait. */
  readonly deadlineMs: number;
  readonly backoff: BackoffPolicy;
}

/** Time and chance, injectable so tests and simulations never wait. */
export interface RetryClock {
  /** Monotonic milliseconds: a deadline must not move with the wall clock. */
  now(): number;
  sleep(ms: number): Promise<void>;
  /** Uniform on [0, 1), like Math.random. */
  random: () => number;
}

export const SYSTEM_CLOCK: RetryClock = { now: () => performance.now(), sleep: (ms) => delay(ms), random: Math.random };

/** Why a call stopped without an answer; also the label of provider_give_ups_total. */
export type GiveUpReason = 'not_retryable' | 'attempts_exhausted' | 'deadline' | 'budget_exhausted';

export type RetryOutcome<T> =
  | { kind: 'done'; value: T; attempts: number }
  | { kind: 'gave_up'; reason: GiveUpReason; detail: string; attempts: number; last?: AttemptFailure };

interface RetryOptions {
  /** Refunded by the first attempt, spent by each retry; without one, only maxAttempts limits retries. */
  budget?: RetryBudget;
  /** Told before each wait, so the caller can count and log the retry. */
  onRetry?(attempt: number, waitMs: number, failure: AttemptFailure): void;
}

/**
 * Runs `attempt` until it gives a value or there is a reason to stop: a failure
 * the table says not to retry, maxAttempts attempts made, the deadline or an
 * empty retry budget. `attempt` gets the milliseconds
 * left before the deadline, to bound its own timeout.
 *
 * Between attempts it waits the backoff delay, or the server's Retry-After when
 * that is longer: a hint is a floor, never a reason to come back sooner. A wait
 * that would end past the deadline is never started: the call gives up at once
 * rather than sleep only to give up afterwards, so a Retry-After is honoured
 * only while it fits in the time left.
 */
export async function retry<T>(
  policy: RetryPolicy,
  attempt: (timeLeftMs: number) => Promise<{ value: T } | { failure: AttemptFailure }>,
  options: RetryOptions = {},
  clock: RetryClock = SYSTEM_CLOCK,
): Promise<RetryOutcome<T>> {
  const { maxAttempts, deadlineMs, backoff } = policy;
  // A caller's bug, not provider trouble: NaN here would mean retrying until the deadline.
  if (!Number.isInteger(maxAttempts) || maxAttempts < 1) {
    throw new RangeError(`maxAttempts must be a positive integer, got ${maxAttempts}`);
  }
  if (!(deadlineMs > 0)) throw new RangeError(`deadlineMs must be positive, got ${deadlineMs}`);
  const { budget } = options;
  const deadline = clock.now() + deadlineMs;
  let attempts = 0;
  let last: AttemptFailure | undefined;
  const gaveUp = (reason: GiveUpReason, detail: string): RetryOutcome<T> => ({
    kind: 'gave_up',
    reason,
    detail,
    attempts,
    last,
  });

  for (;;) {
    const left = deadline - clock.now();
    if (left <= 0) return gaveUp('deadline', 'deadline reached');
    if (attempts === 0) budget?.refundFirstAttempt();
    attempts++;
    const result = await attempt(left);
    if ('value' in result) return { kind: 'done', value: result.value, attempts };
    last = result.failure;

    if (last.rule.disposition === 'never') return gaveUp('not_retryable', 'not retried');
    if (attempts >= maxAttempts) return gaveUp('attempts_exhausted', `${attempts} of ${maxAttempts} attempts used`);
    const waitMs = Math.max(backoffDelayMs(backoff, attempts - 1, clock.random), last.retryAfterMs ?? 0);
    const leftNow = deadline - clock.now();
    if (waitMs >= leftNow) {
      return gaveUp('deadline', `next attempt due in ${Math.round(waitMs)} ms, only ${Math.round(leftNow)} ms left`);
    }
    if (budget && !budget.trySpendRetry()) {
      return gaveUp('budget_exhausted', `retry budget empty (${budget.tokens.toFixed(2)} of ${budget.capacity} tokens)`);
    }
    options.onRetry?.(attempts, waitMs, last);
    await clock.sleep(waitMs);
  }
}
