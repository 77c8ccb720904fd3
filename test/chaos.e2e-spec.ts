import { CLEAN_VERDICT } from '../scripts/chaos/verdict';
import { runChaos, shortChaosArgs, verdictOf } from './support/chaos-run';

/** A run's own budget, past which jest gives up on it. */
const SPEC_TIMEOUT_MS = 175_000;
/**
 * Share of the provider's 2xx charge answers that lie in their body (U+0000,
 * a lone surrogate, an over-long failure_code, a wrong type, a missing field,
 * not JSON, cut short), the charge recorded as usual (issue 23): modest, so
 * that it tests what an unusable answer does to a payment (an unknown
 * outcome, settled by reconciliation) without drowning the other faults.
 */
const POISON_RATE = '0.05';

/**
 * The compiled chaos run, as CI's short version of `npm run chaos`: two APIs,
 * two workers and the provider failing 30 % of its calls and poisoning 5 % of
 * its 2xx charge and refund answers, crashes, a Redis flush and a fast and an immediate
 * Postgres restart under merchants paying through the client library, who refund a good share of what
 * they paid (partly, in turns, several at once, some on refund fault cards),
 * every merchant's endpoint failing or holding some first attempts, then the
 * audit and the count of events delivered. Its own redis-server and Postgres cluster: nothing here
 * touches what the other e2e files use.
 */
describe('npm run chaos (short)', () => {
  it(
    'ends with every payment and refund terminal, none lost, none charged or refunded twice or over, every event delivered under one webhook-id, and exit code 0',
    async () => {
      const run = await runChaos(shortChaosArgs('payments_chaos_e2e', ['--poison-rate', POISON_RATE]));
      const summary = verdictOf(run) as Record<string, unknown> & {
        faults: Record<string, number>;
        answers: Record<string, number>;
        refund_answers: Record<string, number>;
        refunds_by_status: Record<string, number>;
        postgres_outages: { count: number; answers: Record<string, number> };
        webhook_receipts: { answers: Record<string, number> };
        given_up: Record<string, number>;
      };
      expect(summary).toMatchObject(CLEAN_VERDICT);
      // Enough happened for the zeros to mean something.
      expect(summary.payments).toBeGreaterThanOrEqual(280);
      expect(summary.charges).toBeGreaterThan(0);
      expect(summary.requests as number).toBeGreaterThan(summary.payments as number);
      expect(summary.max_ms_to_terminal).toEqual(expect.any(Number));
      expect(summary.faults.api_kills).toBeGreaterThanOrEqual(1);
      expect(summary.faults.worker_kills).toBeGreaterThanOrEqual(1);
      expect(summary.faults.redis_flushes).toBe(1);
      expect(summary.faults).toMatchObject({ postgres_restarts_fast: 1, postgres_restarts_immediate: 1 });
      expect(summary.answers['422 idempotency_key_reused']).toBeGreaterThan(0);
      // The clients reported every refusal they got as a give-up (no retry could change it), beside the
      // give-ups they resumed; and none silently (silent_give_ups above).
      expect(summary.given_up.not_retryable).toBeGreaterThanOrEqual(
        summary.answers['422 idempotency_key_reused'] + summary.refund_answers['400 amount_too_large'],
      );
      expect(summary.abandoned).toEqual(expect.any(Number));
      // Outcomes the provider left open reached the clients as 202 (a pending
      // charge, or no answer once retries ran out). Refusals while a client's
      // circuit was open (503 provider_unavailable) come in most runs but not
      // all: the circuit opens on a run of failures, which a fast machine may
      // not draw (0 in one CI run, 6 to 90 in others). test/resilience.e2e-spec.ts
      // opens it on purpose.
      expect(summary.answers['202']).toBeGreaterThan(0);
      // While Postgres was down, the clients were told so.
      expect(summary.postgres_outages.count).toBe(2);
      expect(summary.postgres_outages.answers['503 service_unavailable']).toBeGreaterThan(0);
      // A good share of the payments refunded, under every outcome: refunded,
      // refused by the provider (pm_card_refund_fails), left pending a while
      // (pm_card_refund_pending, lost and late replies) and, where refunds of
      // one payment asked for more than it together, refused with nothing written.
      expect(summary).toMatchObject({
        double_refunds: 0,
        orphan_refunds: 0,
        over_refunds: 0,
        lost_refunds: 0,
        non_terminal_refunds: 0,
      });
      expect(summary.refunds).toBeGreaterThanOrEqual(50);
      expect(summary.refunds_by_status).toMatchObject({ pending: 0, requires_review: 0 });
      expect(summary.refunds_by_status.succeeded).toBeGreaterThan(0);
      expect(summary.refunds_by_status.failed).toBeGreaterThan(0);
      expect(summary.refund_answers['201']).toBeGreaterThan(0);
      expect(summary.refund_answers['202']).toBeGreaterThan(0);
      expect(summary.refund_answers['402 refund_failed']).toBeGreaterThan(0);
      expect(summary.refund_answers['400 amount_too_large']).toBeGreaterThan(0);
      // Every final payment and refund announced, and the endpoints' refusals retried.
      expect(summary.events as number).toBeGreaterThanOrEqual((summary.payments as number) + (summary.refunds as number));
      expect(summary.webhook_receipts.answers['500']).toBeGreaterThan(0);
      expect(summary.webhook_latency_ms).toEqual({ p50: expect.any(Number), p99: expect.any(Number) });
    },
    SPEC_TIMEOUT_MS,
  );
});
