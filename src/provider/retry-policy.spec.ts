import { draws } from '../../test/support/draws.fixture';
import { mulberry32 } from '../../test/support/random';
import { type AttemptFailure, ruleFor } from './provider-errors';
import { RetryBudget } from './retry-budget';
import { type RetryClock, type RetryPolicy, backoffDelayMs, exponentialMs, retry } from './retry-policy';

const base = 100;
const cap = 1000;
const policy = (variant: 'full' | 'equal') => ({ variant, baseMs: base, capMs: cap });

describe('exponentialMs', () => {
  it('doubles from base for retry 0 and stops at the cap', () => {
    expect([0, 1, 2, 3, 4, 5].map((r) => exponentialMs(r, base, cap))).toEqual([100, 200, 400, 800, 1000, 1000]);
  });

  it('stays finite for huge retry indexes, and zero for a zero base', () => {
    expect(exponentialMs(5000, base, cap)).toBe(cap);
    expect(exponentialMs(5000, 0, cap)).toBe(0);
  });

  it('rejects a negative or fractional retry index', () => {
    expect(() => exponentialMs(-1, base, cap)).toThrow(RangeError);
    expect(() => exponentialMs(1.5, base, cap)).toThrow(RangeError);
  });
});

describe('backoffDelayMs', () => {
  const N = 100_000;

  it.each([0, 2, 6])('full jitter at retry %i lies in [0, e) with mean e/2', (retry) => {
    const e = exponentialMs(retry, base, cap);
    const random = mulberry32(42);
    const s = draws(N, () => backoffDelayMs(policy('full'), retry, random));
    expect(s.min).toBeGreaterThanOrEqual(0);
    expect(s.max).toBeLessThan(e);
    expect(s.mean).toBeGreaterThan(e * 0.49);
    expect(s.mean).toBeLessThan(e * 0.51);
  });

  it.each([0, 2, 6])('equal jitter at retry %i lies in [e/2, e) with mean 3e/4', (retry) => {
    const e = exponentialMs(retry, base, cap);
    const random = mulberry32(7);
    const s = draws(N, () => backoffDelayMs(policy('equal'), retry, random));
    expect(s.min).toBeGreaterThanOrEqual(e / 2);
    expect(s.max).toBeLessThan(e);
    expect(s.mean).toBeGreaterThan(e * 0.745);
    expect(s.mean).toBeLessThan(e * 0.755);
  });

  it('uses the injected random source at both ends of its range', () => {
    const e = exponentialMs(3, base, cap);
    const low = () => 0;
    const high = () => 1 - Number.EPSILON;
    expect(backoffDelayMs(policy('full'), 3, low)).toBe(0);
    expect(backoffDelayMs(policy('full'), 3, high)).toBeCloseTo(e);
    expect(backoffDelayMs(policy('equal'), 3, low)).toBe(e / 2);
    expect(backoffDelayMs(policy('equal'), 3, high)).toBeCloseTo(e);
  });

  it('every variant is a finite, non-negative delay', () => {
    const random = mulberry32(9);
    for (const variant of ['full', 'equal'] as const) {
      for (let retry = 0; retry < 40; retry++) {
        const d = backoffDelayMs(policy(variant), retry, random);
        expect(Number.isFinite(d) && d >= 0 && d <= cap).toBe(true);
      }
    }
  });
});

describe('retry', () => {
  const transient = { rule: ruleFor('HTTP 503'), reason: 'HTTP 503' };
  const policy = (overrides: Partial<RetryPolicy> = {}): RetryPolicy => ({
    maxAttempts: 3,
    deadlineMs: 10_000,
    backoff: { variant: 'full', baseMs: 100, capMs: 1000 },
    ...overrides,
  });

  /** A clock that moves only when the loop sleeps (or an attempt says it took time). */
  function fakeClock(random = 0.5) {
    const clock = { t: 0, slept: [] as number[] };
    const deps: RetryClock = {
      now: () => clock.t,
      sleep: async (ms) => {
        clock.slept.push(ms);
        clock.t += ms;
      },
      random: () => random,
    };
    return { clock, deps };
  }

  /** Fails `failures` times with `failure`, then succeeds with the attempt number. */
  function flaky(failures: number, failure: AttemptFailure = transient) {
    const calls: number[] = [];
    const attempt = async (timeLeftMs: number) => {
      calls.push(timeLeftMs);
      return calls.length > failures ? { value: calls.length } : { failure };
    };
    return { calls, attempt };
  }

  it('counts attempts as total attempts, the first one included', async () => {
    const { attempt, calls } = flaky(Infinity);
    const outcome = await retry(policy({ maxAttempts: 3 }), attempt, {}, fakeClock().deps);
    expect(outcome).toMatchObject({ kind: 'gave_up', reason: 'attempts_exhausted', attempts: 3, last: transient });
    expect(calls).toHaveLength(3);
  });

  it('returns the value of the first attempt that succeeds, after a backoff wait per retry', async () => {
    const { clock, deps } = fakeClock(0.5);
    const outcome = await retry(policy(), flaky(2).attempt, {}, deps);
    expect(outcome).toEqual({ kind: 'done', value: 3, attempts: 3 });
    expect(clock.slept).toEqual([50, 100]); // full jitter, random() = 0.5, ceilings 100 and 200
  });

  it('stops at once on a failure the table says never to retry', async () => {
    const { clock, deps } = fakeClock();
    const never = { rule: ruleFor('HTTP other'), reason: 'HTTP 400' };
    const outcome = await retry(policy(), flaky(Infinity, never).attempt, {}, deps);
    expect(outcome).toMatchObject({ reason: 'not_retryable', attempts: 1, last: never });
    expect(clock.slept).toEqual([]);
  });

  it('waits at least the Retry-After hint, even when the backoff is shorter', async () => {
    const { clock, deps } = fakeClock(0);
    const throttled = { rule: ruleFor('HTTP 429'), reason: 'HTTP 429', retryAfterMs: 1000 };
    await expect(retry(policy(), flaky(1, throttled).attempt, {}, deps)).resolves.toMatchObject({ kind: 'done' });
    expect(clock.slept).toEqual([1000]);
  });

  it('gives every attempt the time left, and gives up without sleeping when the next wait would pass the deadline', async () => {
    const { clock, deps } = fakeClock();
    const throttled = { rule: ruleFor('HTTP 429'), reason: 'HTTP 429', retryAfterMs: 600 };
    const { attempt, calls } = flaky(Infinity, throttled);
    const outcome = await retry(policy({ maxAttempts: 10, deadlineMs: 1500 }), attempt, {}, deps);
    expect(outcome).toMatchObject({
      reason: 'deadline',
      attempts: 3,
      detail: 'next attempt due in 600 ms, only 300 ms left',
    });
    expect(calls).toEqual([1500, 900, 300]);
    expect(clock.slept).toEqual([600, 600]);
  });

  it('gives up once an attempt has used the whole deadline', async () => {
    const { clock, deps } = fakeClock();
    const outcome = await retry(
      policy({ deadlineMs: 1000, backoff: { variant: 'full', baseMs: 0, capMs: 0 } }),
      async () => {
        clock.t += 1000;
        return { failure: transient };
      },
      {},
      deps,
    );
    expect(outcome).toMatchObject({ reason: 'deadline', attempts: 1 });
  });

  it('refunds the budget on the first attempt, pays each retry from it, and fails fast when it is empty', async () => {
    const budget = new RetryBudget(2, 0.5);
    const onRetry = jest.fn();
    const { attempt, calls } = flaky(Infinity);
    const outcome = await retry(policy({ maxAttempts: 10 }), attempt, { budget, onRetry }, fakeClock().deps);
    expect(outcome).toMatchObject({ reason: 'budget_exhausted', attempts: 3 });
    expect(calls).toHaveLength(3);
    expect(onRetry).toHaveBeenCalledTimes(2);
    expect(budget.tokens).toBe(0);
  });

  it.each([{ maxAttempts: 0 }, { maxAttempts: 1.5 }, { deadlineMs: 0 }, { deadlineMs: Number.NaN }])(
    'refuses %j as a caller bug',
    async (overrides) => {
      const { attempt, calls } = flaky(0);
      await expect(retry(policy(overrides), attempt, {}, fakeClock().deps)).rejects.toThrow(RangeError);
      expect(calls).toHaveLength(0);
    },
  );
});
