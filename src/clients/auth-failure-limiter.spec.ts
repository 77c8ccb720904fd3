import { AuthFailureLimiter } from './auth-failure-limiter';

describe('AuthFailureLimiter', () => {
  beforeEach(() => jest.useFakeTimers({ now: 1_000_000 }));
  afterEach(() => jest.useRealTimers());

  it('refuses an address once it has failed `limit` times, for the rest of its window', () => {
    const limiter = new AuthFailureLimiter(3, 60_000);
    for (let i = 0; i < 2; i++) limiter.recordFailure('10.0.0.1');
    expect(limiter.refusingForSeconds('10.0.0.1')).toBe(0);

    jest.advanceTimersByTime(20_000);
    limiter.recordFailure('10.0.0.1');

    // The window runs from the first failure, not the last.
    expect(limiter.refusingForSeconds('10.0.0.1')).toBe(40);
  });

  it('forgets an address when its window ends', () => {
    const limiter = new AuthFailureLimiter(1, 60_000);
    limiter.recordFailure('10.0.0.1');
    expect(limiter.refusingForSeconds('10.0.0.1')).toBe(60);

    jest.advanceTimersByTime(60_001);

    expect(limiter.refusingForSeconds('10.0.0.1')).toBe(0);
  });

  it('counts each address on its own', () => {
    const limiter = new AuthFailureLimiter(1, 60_000);
    limiter.recordFailure('10.0.0.1');

    expect(limiter.refusingForSeconds('10.0.0.2')).toBe(0);
  });
});
