import { execFile } from 'node:child_process';
import { join } from 'node:path';

const CHAOS = join(__dirname, '..', '..', 'dist', 'scripts', 'chaos.js');
/** The CI-sized run of test/chaos.e2e-spec.ts, every API and worker behind a private PgBouncer. */
const ARGS = [
  ['--payments', '300'],
  ['--seconds', '30'],
  ['--drain-seconds', '40'],
  ['--events-seconds', '20'],
  ['--database', 'payments_chaos_scale'],
  ['--failure-rate', '0.3'],
  ['--postgres-restarts', '2'],
  ['--postgres-down-seconds', '3'],
  ['--pgbouncer'],
].flat();
const RUN_TIMEOUT_MS = 170_000;

/**
 * The short chaos run with a transaction-pooling PgBouncer between the
 * processes and Postgres: crashes, a Redis flush, a fast and an immediate
 * Postgres restart behind the pooler (which keeps its client connections and
 * loses its server ones), provider failures and flaky merchant endpoints.
 */
describe('npm run chaos -- --pgbouncer (short)', () => {
  it(
    'ends with nothing lost or charged twice, every event delivered, and the outages answered 503, through the pooler',
    async () => {
      const { code, stdout, stderr } = await new Promise<{ code: number | null; stdout: string; stderr: string }>(
        (settle) => {
          execFile(process.execPath, [CHAOS, ...ARGS], { timeout: RUN_TIMEOUT_MS, maxBuffer: 16 * 1024 * 1024 }, (error, out, err) =>
            settle({ code: error ? (typeof error.code === 'number' ? error.code : null) : 0, stdout: out, stderr: err }),
          );
        },
      );

      const lines = stdout.trim().split('\n');
      expect({ code, lines: lines.length, stderr: code === 0 ? '' : stderr }).toEqual({ code: 0, lines: 1, stderr: '' });
      expect(stderr).toMatch(/pgbouncer on port \d+/);
      const summary = JSON.parse(lines[0]) as Record<string, unknown> & {
        faults: Record<string, number>;
        postgres_outages: { count: number; answers: Record<string, number> };
      };
      expect(summary).toMatchObject({
        ok: true,
        double_charges: 0,
        orphan_charges: 0,
        lost: 0,
        non_terminal: 0,
        events_missing: 0,
        events_split: 0,
        violations: {
          contradicted: 0,
          reuse_not_refused: 0,
          server_errors: 0,
          audit: 0,
          hangs: 0,
          not_recovered: 0,
          unexpected_exits: 0,
          events_unverified: 0,
          events_foreign: 0,
        },
      });
      expect(summary.payments).toBeGreaterThanOrEqual(280);
      expect(summary.faults).toMatchObject({ redis_flushes: 1, postgres_restarts_fast: 1, postgres_restarts_immediate: 1 });
      expect(summary.faults.api_kills).toBeGreaterThanOrEqual(1);
      expect(summary.postgres_outages.count).toBe(2);
      expect(summary.postgres_outages.answers['503 service_unavailable']).toBeGreaterThan(0);
      expect(summary.events as number).toBeGreaterThanOrEqual(summary.payments as number);
    },
    RUN_TIMEOUT_MS + 5_000,
  );
});
