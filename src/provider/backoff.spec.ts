import { BACKOFF_VARIANTS, backoffDelayMs, exponentialMs, mulberry32, type BackoffVariant } from './backoff';

const base = 100;
const cap = 1000;
const policy = (variant: BackoffVariant) => ({ variant, baseMs: base, capMs: cap });

function draws(n: number, next: () => number): { min: number; max: number; mean: number } {
  let min = Infinity;
  let max = -Infinity;
  let sum = 0;
  for (let i = 0; i < n; i++) {
    const v = next();
    min = Math.min(min, v);
    max = Math.max(max, v);
    sum += v;
  }
  return { min, max, mean: sum / n };
}

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

  it('none is always 0 and exponential has no jitter', () => {
    const random = mulberry32(1);
    for (let retry = 0; retry < 8; retry++) {
      expect(backoffDelayMs(policy('none'), retry, undefined, random)).toBe(0);
      expect(backoffDelayMs(policy('exponential'), retry, undefined, random)).toBe(exponentialMs(retry, base, cap));
    }
  });

  it.each([0, 2, 6])('full jitter at retry %i lies in [0, e) with mean e/2', (retry) => {
    const e = exponentialMs(retry, base, cap);
    const random = mulberry32(42);
    const s = draws(N, () => backoffDelayMs(policy('full'), retry, undefined, random));
    expect(s.min).toBeGreaterThanOrEqual(0);
    expect(s.max).toBeLessThan(e);
    expect(s.mean).toBeGreaterThan(e * 0.49);
    expect(s.mean).toBeLessThan(e * 0.51);
  });

  it.each([0, 2, 6])('equal jitter at retry %i lies in [e/2, e) with mean 3e/4', (retry) => {
    const e = exponentialMs(retry, base, cap);
    const random = mulberry32(7);
    const s = draws(N, () => backoffDelayMs(policy('equal'), retry, undefined, random));
    expect(s.min).toBeGreaterThanOrEqual(e / 2);
    expect(s.max).toBeLessThan(e);
    expect(s.mean).toBeGreaterThan(e * 0.745);
    expect(s.mean).toBeLessThan(e * 0.755);
  });

  it('decorrelated lies in [base, 3 * previous) with mean (base + 3 * previous) / 2 below the cap', () => {
    const random = mulberry32(3);
    const previous = 200;
    const s = draws(N, () => backoffDelayMs(policy('decorrelated'), 0, previous, random));
    expect(s.min).toBeGreaterThanOrEqual(base);
    expect(s.max).toBeLessThan(3 * previous);
    expect(s.mean).toBeGreaterThan(350 * 0.99);
    expect(s.mean).toBeLessThan(350 * 1.01);
  });

  it('decorrelated starts from previous = base and never exceeds the cap', () => {
    const random = mulberry32(5);
    const first = draws(N, () => backoffDelayMs(policy('decorrelated'), 0, undefined, random));
    expect(first.min).toBeGreaterThanOrEqual(base);
    expect(first.max).toBeLessThan(3 * base);

    let previous = base;
    const chain = draws(N, () => (previous = backoffDelayMs(policy('decorrelated'), 0, previous, random)));
    expect(chain.max).toBeLessThanOrEqual(cap);
    expect(chain.mean).toBeGreaterThan(cap / 2);
  });

  it('uses the injected random source at both ends of its range', () => {
    const e = exponentialMs(3, base, cap);
    const low = () => 0;
    const high = () => 1 - Number.EPSILON;
    expect(backoffDelayMs(policy('full'), 3, undefined, low)).toBe(0);
    expect(backoffDelayMs(policy('full'), 3, undefined, high)).toBeCloseTo(e);
    expect(backoffDelayMs(policy('equal'), 3, undefined, low)).toBe(e / 2);
    expect(backoffDelayMs(policy('decorrelated'), 3, 300, low)).toBe(base);
    expect(backoffDelayMs(policy('decorrelated'), 3, 300, high)).toBeCloseTo(900);
  });

  it('every variant is a finite, non-negative delay', () => {
    const random = mulberry32(9);
    for (const variant of BACKOFF_VARIANTS) {
      for (let retry = 0; retry < 40; retry++) {
        const d = backoffDelayMs(policy(variant), retry, cap, random);
        expect(Number.isFinite(d) && d >= 0 && d <= cap).toBe(true);
      }
    }
  });
});

describe('mulberry32', () => {
  it('is deterministic per seed and differs across seeds', () => {
    const a = mulberry32(123);
    const b = mulberry32(123);
    const c = mulberry32(124);
    const seqA = Array.from({ length: 5 }, a);
    expect(Array.from({ length: 5 }, b)).toEqual(seqA);
    expect(Array.from({ length: 5 }, c)).not.toEqual(seqA);
  });

  it('draws uniformly from [0, 1)', () => {
    const s = draws(100_000, mulberry32(2026));
    expect(s.min).toBeGreaterThanOrEqual(0);
    expect(s.max).toBeLessThan(1);
    expect(s.mean).toBeGreaterThan(0.495);
    expect(s.mean).toBeLessThan(0.505);
  });
});
