import { cpuSpent } from './measure';

describe('cpuSpent', () => {
  it('counts what each backend spent, all of it for a backend that started in between, nothing for one gone', () => {
    const before = new Map([
      [10, 100],
      [11, 50],
      [12, 70],
    ]);
    const after = new Map([
      [10, 130],
      [11, 50],
      [13, 20],
    ]);
    expect(cpuSpent(before, after)).toBe(30 + 0 + 20);
  });
});
