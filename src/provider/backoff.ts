/**
 * Retry delays, after the AWS Architecture Blog article "Exponential Backoff And
 * Jitter". Pure functions of (policy, retry index, previous delay, random source),
 * so the provider client, a retry simulator and tests share the same formulas.
 *
 * Numbering: `retry` is the 0-based index of the retry being scheduled. The wait
 * before the first retry (that is, before attempt 2) is retry 0, whose exponential
 * ceiling is `min(cap, base * 2^0) = min(cap, base)`.
 */

/** A uniform random source in [0, 1), like Math.random. */
export type Random = () => number;

export const BACKOFF_VARIANTS = ['none', 'exponential', 'full', 'equal', 'decorrelated'] as const;
export type BackoffVariant = (typeof BACKOFF_VARIANTS)[number];

export interface BackoffPolicy {
  readonly variant: BackoffVariant;
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
 * How long to wait before retry number `retry` (0-based).
 *
 * - none: 0, retry at once (the baseline that shows why backoff exists).
 * - exponential: e = min(cap, base * 2^retry), no jitter.
 * - full: random(0, e).
 * - equal: e/2 + random(0, e/2).
 * - decorrelated: min(cap, random(base, previous * 3)), where `previousMs` is the
 *   delay returned for the previous retry (base for the first one). It ignores
 *   `retry`: its growth comes from the previous delay, so callers keep that state.
 *
 * random(a, b) is uniform on [a, b): a + random() * (b - a).
 */
export function backoffDelayMs(
  policy: BackoffPolicy,
  retry: number,
  previousMs: number = policy.baseMs,
  random: Random = Math.random,
): number {
  const { baseMs, capMs } = policy;
  const e = exponentialMs(retry, baseMs, capMs);
  switch (policy.variant) {
    case 'none':
      return 0;
    case 'exponential':
      return e;
    case 'full':
      return random() * e;
    case 'equal':
      return e / 2 + random() * (e / 2);
    case 'decorrelated':
      return Math.min(capMs, baseMs + random() * (previousMs * 3 - baseMs));
  }
}

/**
 * mulberry32: a tiny seeded PRNG (32-bit state), good enough for reproducible
 * tests and simulations; not for anything secret.
 */
export function mulberry32(seed: number): Random {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
