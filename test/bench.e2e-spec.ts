import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { runScript } from './support/run-script';
import { TEST_DATABASE_URL } from './support/test-env';

const BENCH = join(__dirname, '..', 'dist', 'scripts', 'bench.js');
/** Its own database, named after the suite's so that two suites running at once never share one. */
const DATABASE = `bench_e2e_of_${new URL(TEST_DATABASE_URL).pathname.slice(1)}`;
const ARGS = [
  ['--json'],
  ['--seconds', '1'],
  ['--warmup', '0'],
  ['--connections', '2'],
  ['--storm-requests', '200'],
  ['--backlog', '100'],
  ['--prune-keys', '1000'],
  ['--soak-seconds', '2'],
  ['--database', DATABASE],
].flat();
/** About 40 s on the 2-core machine at a load average of 13; generous for a more loaded one. */
const RUN_TIMEOUT_MS = 110_000;

interface Side {
  requests: number;
  errors: number;
  non_2xx: number;
  cpu_ms_per_request: number;
  postgres_cpu_ms_per_request: number | null;
}

/**
 * `npm run bench` end to end with tiny settings: the API answers every load
 * (refunds included) without an error, the storm makes one payment and one charge, the worker
 * drains the backlog, and the soak samples the API's RSS.
 */
describe('npm run bench (tiny)', () => {
  jest.setTimeout(RUN_TIMEOUT_MS + 10_000);

  it('measures the API in every scenario', async () => {
    const { code, stdout, stderr } = await runScript(BENCH, ARGS, { timeoutMs: RUN_TIMEOUT_MS });
    expect({ code, stderr: code === 0 ? '' : stderr || stdout }).toEqual({ code: 0, stderr: '' });

    const report = JSON.parse(stdout) as {
      loads: Record<string, Record<string, Side>>;
      storm: Record<string, unknown>;
      backlog: Record<string, unknown>;
      soak: { samples: { rss_mb: number; anon_mb: number; file_mb: number }[]; heap_at_end: { heap_used_mb: number } | null };
      statistics: string;
      payments: number;
      provider_charges: number;
      refunds: number;
      provider_refunds: number;
      ok: boolean;
    };
    expect(Object.keys(report.loads)).toEqual(['create', 'refund', 'replay', 'get', 'list']);
    for (const sides of Object.values(report.loads)) {
      // Under `api`, where readers of the JSON (bench-standby) take the figures, and nothing beside it.
      expect(Object.keys(sides)).toEqual(['api']);
      expect(sides.api.requests).toBeGreaterThan(0);
      expect({ errors: sides.api.errors, non_2xx: sides.api.non_2xx }).toEqual({ errors: 0, non_2xx: 0 });
      expect(sides.api.cpu_ms_per_request).toBeGreaterThan(0);
    }
    // The suite's Postgres runs on this machine, and a create is two transactions.
    expect(report.loads.create.api.postgres_cpu_ms_per_request).toBeGreaterThan(0);
    expect(report.storm).toMatchObject({ requests: 200, created: 1, other: 0, payments: 1, charges: 1, ok: true });
    expect(report.backlog).toMatchObject({ payments: 100, left_pending: 0, ok: true });
    expect(report.soak.samples.length).toBeGreaterThanOrEqual(2);
    const [first] = report.soak.samples;
    expect(first.anon_mb + first.file_mb).toBeCloseTo(first.rss_mb, 0);
    expect(report.soak.heap_at_end?.heap_used_mb).toBeGreaterThan(0);
    // This machine's Postgres runs with autovacuum off, CI's too; either answer names who keeps the statistics.
    expect(report.statistics).toMatch(/^(autovacuum|ANALYZE every 5 s)$/);
    expect(report.payments).toBe(report.provider_charges);
    expect(report.refunds).toBeGreaterThan(0);
    expect(report.refunds).toBe(report.provider_refunds);
    expect(report.ok).toBe(true);
  });

  it('refuses a database whose name does not say "bench", before touching anything', () => {
    const result = spawnSync(process.execPath, [BENCH, '--database', 'payments_test'], { encoding: 'utf8', timeout: 20_000 });

    expect(result.status).toBe(1);
    expect(result.stderr).toContain('must be lower-case letters, digits and _, and contain "bench"');
  });
});
