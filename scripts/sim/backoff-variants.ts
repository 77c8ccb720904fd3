import { backoffDelayMs, exponentialMs } from '../../src/provider/retry-policy';
import type { Random } from '../../test/support/random';

/**
 * The five backoffs of the storm (the seed's section 04). 'full' and 'equal'
 * are the production formulas, called rather than copied, so their figures
 * are those of the code that runs; 'none', 'exponential' and 'decorrelated'
 * run nowhere else and are here to be compared against. `retry` is numbered as
 * in src/provider/retry-policy.ts: the 0-based index of the retry being
 * scheduled.
 */
export const BACKOFF_VARIANTS = ['none', 'exponential', 'full', 'equal', 'decorrelated'] as const;
export type BackoffVariant = (typeof BACKOFF_VARIANTS)[number];

interface VariantBackoff {
  readonly variant: BackoffVariant;
  readonly baseMs: number;
  readonly capMs: number;
}

/**
 * How long to wait before retry number `retry`:
 *
 * - none: 0, retry at once (the baseline that shows why backoff exists).
 * - exponential: e = min(cap, base * 2^retry), no jitter.
 * - full, equal: backoffDelayMs.
 * - decorrelated: min(cap, random(base, previous * 3)), where `previousMs` is
 *   the delay returned for the previous retry (base for the first one). It
 *   ignores `retry`: its growth comes from the previous delay, so callers keep
 *   that state.
 */
export function variantDelayMs(backoff: VariantBackoff, retry: number, previousMs: number, random: Random): number {
  const { variant, baseMs, capMs } = backoff;
  switch (variant) {
    case 'none':
      return 0;
    case 'exponential':
      return exponentialMs(retry, baseMs, capMs);
    case 'full':
    case 'equal':
      return backoffDelayMs({ variant, baseMs, capMs }, retry, random);
    case 'decorrelated':
      return Math.min(capMs, baseMs + random() * (previousMs * 3 - baseMs));
  }
}
