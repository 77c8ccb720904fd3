import { execFile } from 'node:child_process';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import type { FleetRun } from '../scripts/client-budget';

jest.setTimeout(120_000);

/**
 * `npm run client:budget` on the real stack (a private Postgres, stopped under
 * a running API, so that every answer is 503), with a fleet small enough for
 * a spec: 4 clients of 150 payments over 5 s. The figures the script prints by
 * default (20 x 300 over 120 s, about two minutes) are in client/README.md.
 */
const SCRIPT = resolve(__dirname, '../dist/scripts/client-budget.js');
const OPTIONS = { clients: 4, operations: 150, seconds: 5, maxRetries: 3 };

describe('npm run client:budget', () => {
  let report: { budget: { ratio: number; burst: number }; without: FleetRun; with: FleetRun };

  beforeAll(async () => {
    const args = ['--clients', '4', '--operations', '150', '--seconds', '5', '--max-retries', '3', '--json'];
    const { stdout } = await promisify(execFile)(process.execPath, [SCRIPT, ...args], { timeout: 100_000 });
    report = JSON.parse(stdout);
  });

  it('faces an API whose every answer is 503, and no call gives up silently', () => {
    const first = OPTIONS.clients * OPTIONS.operations;
    for (const run of [report.without, report.with]) {
      expect(run.first).toBe(first);
      expect(run.answers).toEqual({ 503: run.requests });
      expect(run.silent).toBe(0);
      expect(Object.values(run.gaveUp).reduce((sum, n) => sum + n, 0)).toBe(first);
    }
  });

  it('sends 1 + maxRetries requests per payment without a budget', () => {
    expect(report.without.load).toBe(1 + OPTIONS.maxRetries);
    expect(report.without.gaveUp).toEqual({ max_retries: OPTIONS.clients * OPTIONS.operations });
  });

  it('sends about 1 + ratio + burst/M with the budget: 1.1x and the burst, not 4x', () => {
    const { ratio, burst } = report.budget;
    const bound = 1 + ratio + burst / OPTIONS.operations;

    expect(report.with.load).toBeLessThanOrEqual(bound);
    expect(report.with.load).toBeGreaterThan(bound - 2 / OPTIONS.operations);
  });
});
