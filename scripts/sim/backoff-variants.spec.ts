import { backoffDelayMs, exponentialMs } from '../../src/provider/retry-policy';
import { draws } from '../../test/support/draws.fixture';
import { mulberry32 } from '../../test/support/random';
import { BACKOFF_VARIANTS, type BackoffVariant, variantDelayMs } from './backoff-variants';

const base = 100;
const cap = 1000;
const policy = (variant: BackoffVariant) => ({ variant, baseMs: base, capMs: cap });

describe('variantDelayMs', () => {
  const N = 100_000;

  it('none is always 0 and exponential has no jitter', () => {
    const random = mulberry32(1);
    for (let retry = 0; retry < 8; retry++) {
      expect(variantDelayMs(policy('none'), retry, base, random)).toBe(0);
      expect(variantDelayMs(policy('exponential'), retry, base, random)).toBe(exponentialMs(retry, base, cap));
    }
  });

  it.each(['full', 'equal'] as const)('%s is the production backoffDelayMs, draw for draw', (variant) => {
    const lab = mulberry32(11);
    const production = mulberry32(11);
    for (let retry = 0; retry < 12; retry++) {
      expect(variantDelayMs(policy(variant), retry, base, lab)).toBe(
        backoffDelayMs({ variant, baseMs: base, capMs: cap }, retry, production),
      );
    }
  });

  it('decorrelated lies in [base, 3 * previous) with mean (base + 3 * previous) / 2 below the cap', () => {
    const random = mulberry32(3);
    const previous = 200;
    const s = draws(N, () => variantDelayMs(policy('decorrelated'), 0, previous, random));
    expect(s.min).toBeGreaterThanOrEqual(base);
    expect(s.max).toBeLessThan(3 * previous);
    expect(s.mean).toBeGreaterThan(350 * 0.99);
    expect(s.mean).toBeLessThan(350 * 1.01);
  });

  it('decorrelated, started from previous = base, never exceeds the cap', () => {
    const random = mulberry32(5);
    const first = draws(N, () => variantDelayMs(policy('decorrelated'), 0, base, random));
    expect(first.min).toBeGreaterThanOrEqual(base);
    expect(first.max).toBeLessThan(3 * base);

    let previous = base;
    const chain = draws(N, () => (previous = variantDelayMs(policy('decorrelated'), 0, previous, random)));
    expect(chain.max).toBeLessThanOrEqual(cap);
    expect(chain.mean).toBeGreaterThan(cap / 2);
  });

  it('decorrelated uses the injected random source at both ends of its range', () => {
    expect(variantDelayMs(policy('decorrelated'), 3, 300, () => 0)).toBe(base);
    expect(variantDelayMs(policy('decorrelated'), 3, 300, () => 1 - Number.EPSILON)).toBeCloseTo(900);
  });

  it('every variant is a finite, non-negative delay', () => {
    const random = mulberry32(9);
    for (const variant of BACKOFF_VARIANTS) {
      for (let retry = 0; retry < 40; retry++) {
        const d = variantDelayMs(policy(variant), retry, cap, random);
        expect(Number.isFinite(d) && d >= 0 && d <= cap).toBe(true);
      }
    }
  });
});
