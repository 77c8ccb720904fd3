import { RetryBudget, RetryBudgets } from './retry-budget';

describe('RetryBudget', () => {
  it('starts full and pays one token per retry until fewer than one is left', () => {
    const budget = new RetryBudget(3, 0.1);
    expect([1, 2, 3, 4].map(() => budget.trySpendRetry())).toEqual([true, true, true, false]);
    expect(budget.tokens).toBe(0);
  });

  it('refunds a fraction per first attempt, never above capacity', () => {
    const budget = new RetryBudget(10, 0.1);
    budget.refundFirstAttempt();
    expect(budget.tokens).toBe(10);
    budget.trySpendRetry();
    budget.trySpendRetry();
    for (let i = 0; i < 5; i++) budget.refundFirstAttempt();
    expect(budget.tokens).toBeCloseTo(8.5, 10);
  });

  it('needs 1 / refund first attempts to earn one retry back', () => {
    const budget = new RetryBudget(1, 0.25);
    expect(budget.trySpendRetry()).toBe(true);
    for (let i = 0; i < 3; i++) budget.refundFirstAttempt();
    expect(budget.trySpendRetry()).toBe(false);
    budget.refundFirstAttempt();
    expect(budget.trySpendRetry()).toBe(true);
  });

  it('holds load near (1 + refund) calls per request in a total outage (the seed: 6609 calls for 6000 requests)', () => {
    const budget = new RetryBudget(10, 0.1);
    let calls = 0;
    for (let request = 0; request < 6000; request++) {
      calls++;
      budget.refundFirstAttempt();
      for (let retry = 0; retry < 3 && budget.trySpendRetry(); retry++) calls++;
    }
    expect(calls).toBe(6609);
  });

  it.each([
    [0.5, 0.1],
    [Number.NaN, 0.1],
    [10, -0.1],
    [10, 1.5],
  ])('refuses capacity %d with refund %d', (capacity, refund) => {
    expect(() => new RetryBudget(capacity, refund)).toThrow(RangeError);
  });
});

describe('RetryBudgets', () => {
  it('gives each client a bucket of its own: one client emptying its own leaves the others full', () => {
    const budgets = new RetryBudgets(2, 0, 10);
    const a = budgets.for('client_a');
    expect([a.trySpendRetry(), a.trySpendRetry(), a.trySpendRetry()]).toEqual([true, true, false]);

    expect(budgets.for('client_a')).toBe(a);
    expect(budgets.for('client_b').tokens).toBe(2);
    expect(budgets.for('client_b').trySpendRetry()).toBe(true);
  });

  it('keeps at most maxClients buckets, forgetting the least recently used, which comes back full', () => {
    const budgets = new RetryBudgets(2, 0, 2);
    budgets.for('client_a').trySpendRetry();
    budgets.for('client_b').trySpendRetry();
    budgets.for('client_b');
    budgets.for('client_c'); // client_a was the least recently used

    expect(budgets.for('client_a').tokens).toBe(2);
    expect(budgets.for('client_c').tokens).toBe(2);
    expect(budgets.for('client_b').tokens).toBe(2); // pushed out in turn by client_a's return
  });
});
