import { draws } from './draws.fixture';
import { mulberry32 } from './random';

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
