import { reconcileLimiter } from './reconcile-limiter';
import { RECONCILE_JOB_PAYMENTS } from './reconciliation.constants';

/** Payments a second the limiter lets through when every job is full. */
const paymentsPerS = ({ max, duration }: { max: number; duration: number }) => (max * RECONCILE_JOB_PAYMENTS * 1_000) / duration;

describe('reconcileLimiter', () => {
  it('sets no limit for 0', () => {
    expect(reconcileLimiter(0)).toBeUndefined();
  });

  it('paces the default 250 payments/s as one job of 20 every 80 ms, not a burst each second', () => {
    expect(reconcileLimiter(250)).toEqual({ max: 1, duration: 80 });
  });

  it.each([1, 7, 19, 20, 99, 250, 333, 1_999, 2_000, 2_001, 12_345, 100_000])(
    'never lets more than %i payments/s through, and no less than 90 %% of it',
    (limit) => {
      const limiter = reconcileLimiter(limit)!;

      expect(paymentsPerS(limiter)).toBeLessThanOrEqual(limit);
      expect(paymentsPerS(limiter)).toBeGreaterThanOrEqual(0.9 * limit);
      expect(limiter.duration).toBeGreaterThanOrEqual(10);
      expect(Number.isInteger(limiter.max) && Number.isInteger(limiter.duration)).toBe(true);
    },
  );
});
