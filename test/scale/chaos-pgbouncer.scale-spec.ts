import { CLEAN_VERDICT } from '../../scripts/chaos/verdict';
import { runChaos, shortChaosArgs, verdictOf } from '../support/chaos-run';

/** A run's own budget, past which jest gives up on it. */
const SPEC_TIMEOUT_MS = 175_000;

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
      const run = await runChaos(shortChaosArgs('payments_chaos_scale', ['--pgbouncer']));
      const summary = verdictOf(run) as Record<string, unknown> & {
        faults: Record<string, number>;
        postgres_outages: { count: number; answers: Record<string, number> };
      };
      expect(run.stderr).toMatch(/pgbouncer on port \d+/);
      expect(summary).toMatchObject(CLEAN_VERDICT);
      expect(summary.payments).toBeGreaterThanOrEqual(280);
      expect(summary.faults).toMatchObject({ redis_flushes: 1, postgres_restarts_fast: 1, postgres_restarts_immediate: 1 });
      expect(summary.faults.api_kills).toBeGreaterThanOrEqual(1);
      expect(summary.postgres_outages.count).toBe(2);
      expect(summary.postgres_outages.answers['503 service_unavailable']).toBeGreaterThan(0);
      expect(summary.events as number).toBeGreaterThanOrEqual(summary.payments as number);
    },
    SPEC_TIMEOUT_MS,
  );
});
