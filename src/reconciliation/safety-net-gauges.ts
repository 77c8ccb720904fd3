import { Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import type { Queue } from 'bullmq';
import type { DataSource } from 'typeorm';
import { errorForLog } from '../common/log-safety';
import { queryRow } from '../database/sql';
import type { Metrics } from '../metrics/metrics';

/** The BullMQ states queue_jobs reports, each a label value. */
export const QUEUE_STATES = ['waiting', 'active', 'delayed', 'failed', 'prioritized'] as const;

/**
 * Payments not settled yet, in one statement over the rows of the partial
 * index payments_due_idx (status IN ('pending', 'requires_review')): the scan
 * is as long as the payments still in the safety net, never the table.
 */
export const PAYMENTS_SQL = `
  SELECT count(*) FILTER (WHERE status = 'pending')::int AS pending,
         count(*) FILTER (WHERE status = 'requires_review')::int AS requires_review,
         COALESCE(EXTRACT(EPOCH FROM now() - min(created_at) FILTER (WHERE status = 'pending')), 0)::float8
           AS oldest_pending_age_seconds
    FROM payments
   WHERE status IN ('pending', 'requires_review')`;

/** Refunds not settled yet, over the rows of the partial index refunds_due_idx, as for payments. */
export const REFUNDS_SQL = `
  SELECT count(*) FILTER (WHERE status = 'pending')::int AS pending,
         count(*) FILTER (WHERE status = 'requires_review')::int AS requires_review
    FROM refunds
   WHERE status IN ('pending', 'requires_review')`;

/** Deliveries still to send, over the rows of the partial index webhook_deliveries_due_idx (status = 'pending'). */
export const DELIVERIES_SQL = `
  SELECT count(*)::int AS pending,
         COALESCE(EXTRACT(EPOCH FROM now() - min(created_at)), 0)::float8 AS oldest_pending_age_seconds
    FROM webhook_deliveries
   WHERE status = 'pending'`;

interface PaymentsRow {
  pending: number;
  requires_review: number;
  oldest_pending_age_seconds: number;
}

type RefundsRow = Omit<PaymentsRow, 'oldest_pending_age_seconds'>;

interface DeliveriesRow {
  pending: number;
  oldest_pending_age_seconds: number;
}

/**
 * The worker's view of the safety net: payments and refunds pending and in
 * review, deliveries pending, and the jobs in its queues, refreshed every
 * METRICS_GAUGE_INTERVAL_MS from Postgres and Redis (three statements, one
 * Redis round trip per queue) rather than at each scrape, so scrapes and the
 * number of Prometheus servers cost the database nothing.
 *
 * These are database-wide values, not this worker's: every worker computes
 * the same ones on its own timer, so with N workers the same figure is
 * reported N times (a refresh apart). Aggregate with max (or any one worker),
 * never sum. No election: any one worker that is up is enough for the gauges
 * to be there, and N workers cost N times three cheap statements an interval.
 *
 * A refresh that fails (Postgres or Redis away) is logged and leaves the last
 * values; the next one tries again. One refresh at a time, and none after
 * shutdown has begun: the timer is cleared and a refresh under way awaited
 * before the database and Redis connections close.
 */
export class SafetyNetGauges implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger(SafetyNetGauges.name);
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  private stopped = false;

  constructor(
    private readonly dataSource: DataSource,
    private readonly queues: readonly Queue[],
    private readonly metrics: Metrics,
    private readonly intervalMs: number,
  ) {}

  onApplicationBootstrap(): void {
    void this.tick();
    this.timer = setInterval(() => void this.tick(), this.intervalMs).unref();
  }

  async onModuleDestroy(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.running;
  }

  /** One refresh, unless one is under way or the worker is stopping. */
  tick(): Promise<void> {
    if (this.stopped || this.running) return this.running ?? Promise.resolve();
    this.running = this.refresh()
      .catch((error: unknown) => this.logger.warn({ msg: 'could not refresh the gauges; will retry', err: errorForLog(error) }))
      .finally(() => (this.running = undefined));
    return this.running;
  }

  private async refresh(): Promise<void> {
    const db = this.dataSource.manager;
    // Aggregates without GROUP BY: one row each, always.
    const payments = (await queryRow<PaymentsRow>(db, PAYMENTS_SQL))!;
    const refunds = (await queryRow<RefundsRow>(db, REFUNDS_SQL))!;
    const deliveries = (await queryRow<DeliveriesRow>(db, DELIVERIES_SQL))!;
    const counts = await Promise.all(this.queues.map((queue) => queue.getJobCounts(...QUEUE_STATES)));
    // Set together once everything is read, so one scrape never mixes two refreshes.
    const { metrics } = this;
    metrics.paymentsPending.set(payments.pending);
    metrics.paymentsRequiresReview.set(payments.requires_review);
    metrics.paymentsOldestPendingAge.set(payments.oldest_pending_age_seconds);
    metrics.refundsPending.set(refunds.pending);
    metrics.refundsRequiresReview.set(refunds.requires_review);
    metrics.webhookDeliveriesPending.set(deliveries.pending);
    metrics.webhookOldestPendingAge.set(deliveries.oldest_pending_age_seconds);
    for (const [index, queue] of this.queues.entries()) {
      for (const state of QUEUE_STATES) metrics.queueJobs.set({ queue: queue.name, state }, counts[index][state] ?? 0);
    }
  }
}
