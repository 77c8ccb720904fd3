import { execFile } from 'node:child_process';
import { resolve } from 'node:path';
import { promisify } from 'node:util';

/**
 * The retry lab (`npm run sim`) against the seeds' figures (sections 04 to 06).
 * Exact where the experiment draws nothing at random; within 10 % for the
 * jittered storms, whose draws come from our mulberry32 rather than Python's
 * generator.
 */
const SIM = resolve(__dirname, '../dist/scripts/sim.js');
const run = (...args: string[]) => promisify(execFile)(process.execPath, [SIM, ...args], { timeout: 30_000 });

const SEED_STORM = {
  none: { calls: 5050, ticks: 100 },
  exponential: { calls: 5050, ticks: 6079 },
  full: { calls: 643, ticks: 167 },
  equal: { calls: 657, ticks: 223 },
  decorrelated: { calls: 576, ticks: 194 },
};

describe('npm run sim', () => {
  let lab: {
    storm: Record<keyof typeof SEED_STORM, { calls: number; ticks: number }>;
    budget: Record<'without' | 'with', { first: number; backend: number; load: number }>;
    layers: number[];
  };

  beforeAll(async () => {
    const { stdout } = await run('--json');
    lab = JSON.parse(stdout);
  });

  it('prints one JSON object with the storm, budget and layers figures', () => {
    expect(Object.keys(lab)).toEqual(['storm', 'budget', 'layers']);
    expect(Object.keys(lab.storm)).toEqual(Object.keys(SEED_STORM));
  });

  it.each(['none', 'exponential'] as const)('storm, %s: exactly the seed figures', (variant) => {
    expect(lab.storm[variant]).toEqual(SEED_STORM[variant]);
  });

  it.each(['full', 'equal', 'decorrelated'] as const)('storm, %s jitter: the seed figures within 10 %%', (variant) => {
    const { calls, ticks } = lab.storm[variant];
    expect(Math.abs(calls / SEED_STORM[variant].calls - 1)).toBeLessThan(0.1);
    expect(Math.abs(ticks / SEED_STORM[variant].ticks - 1)).toBeLessThan(0.1);
  });

  it('budget: 24000 backend calls (4.00x) without, 6609 (1.10x) with the default budget', () => {
    expect(lab.budget.without).toEqual({ first: 6000, backend: 24_000, load: 4 });
    expect(lab.budget.with).toMatchObject({ first: 6000, backend: 6609 });
    expect(lab.budget.with.load.toFixed(2)).toBe('1.10');
  });

  it('layers: 3, 9, 27, 81, 243 calls reach the bottom', () => {
    expect(lab.layers).toEqual([3, 9, 27, 81, 243]);
  });

  it('prints the same figures as a readable table', async () => {
    const { stdout } = await run();
    expect(stdout).toMatch(/^exponential +5050 +6079$/m);
    expect(stdout).toMatch(new RegExp(`^full +${Math.round(lab.storm.full.calls)} +${Math.round(lab.storm.full.ticks)}$`, 'm'));
    expect(stdout).toMatch(/^without +6000 +24000 +4\.00x$/m);
    expect(stdout).toMatch(/^with \(10 tokens, refund 0\.1\) +6000 +6609 +1\.10x$/m);
    expect(stdout).toMatch(/^calls +3 +9 +27 +81 +243$/m);
  });

  it('refuses an unknown argument', async () => {
    await expect(run('--csv')).rejects.toMatchObject({ code: 2, stderr: 'usage: npm run sim [-- --json]\n' });
  });
});
