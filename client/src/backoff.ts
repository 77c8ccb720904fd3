/** The wait between attempts: capped exponential backoff with full jitter. */
export interface BackoffOptions {
  /** The ceiling of the first wait; each later ceiling doubles. */
  baseMs: number;
  /** No wait's ceiling exceeds it. */
  capMs: number;
}

/**
 * Full jitter, after the AWS Architecture Blog's "Exponential Backoff And
 * Jitter": the wait before retry number `retry` (0 for the first retry) is
 * uniform on [0, min(cap, base * 2^retry)). Spreading each wait over its whole
 * range is what breaks up a crowd of clients that failed together; plain
 * exponential backoff keeps them in step.
 */
export function fullJitterMs(retry: number, { baseMs, capMs }: BackoffOptions, random: () => number): number {
  // 2^1023 is the largest finite power of two: past it base * 2^retry is Infinity (NaN for a zero base).
  const ceiling = Math.min(capMs, baseMs * 2 ** Math.min(retry, 1023));
  return random() * ceiling;
}
