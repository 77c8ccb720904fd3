import { Injectable } from '@nestjs/common';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** What reconciling one payment can come to (reconcile_outcomes_total's outcome label). */
export const RECONCILE_OUTCOMES = ['settled', 'postponed', 'requires_review', 'skipped'] as const;
export type ReconcileOutcome = (typeof RECONCILE_OUTCOMES)[number];

/**
 * The process's Prometheus registry, one per process (not prom-client's global
 * one, so several apps in one test process do not collide).
 */
@Injectable()
export class Metrics {
  readonly registry = new Registry();

  readonly httpRequests = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'HTTP requests by method, route and status.',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });

  readonly paymentAnswers = new Counter({
    name: 'payment_answers_total',
    help:
      'POST /v1/payments answers that carry a payment (201, 202, 402), by status and whether replayed; ' +
      'errors are in http_request_duration_seconds.',
    labelNames: ['status', 'replayed'] as const,
    registers: [this.registry],
  });

  readonly providerAttempts = new Counter({
    name: 'provider_attempts_total',
    help: 'Provider calls sent, by operation and outcome: answered, or the failure class (transient, throttled, never).',
    labelNames: ['operation', 'outcome'] as const,
    registers: [this.registry],
  });

  readonly providerRetries = new Counter({
    name: 'provider_retries_total',
    help: 'Provider attempts after the first of a call, each paid with a retry-budget token.',
    registers: [this.registry],
  });

  readonly providerRetryBudgetExhausted = new Counter({
    name: 'provider_retry_budget_exhausted_total',
    help: 'Provider calls that stopped instead of retrying because the retry budget was empty.',
    registers: [this.registry],
  });

  readonly providerBreakerStateChanges = new Counter({
    name: 'provider_breaker_state_changes_total',
    help:
      'Transitions of the provider circuit breaker, by scope (client: one API client\'s circuit; ' +
      'provider: the provider-wide one) and the state entered.',
    labelNames: ['scope', 'to'] as const,
    registers: [this.registry],
  });

  readonly providerBreakerOpenClients = new Gauge({
    name: 'provider_breaker_open_clients',
    help: 'API clients whose provider circuit is open in this process.',
    registers: [this.registry],
  });

  readonly providerGiveUps = new Counter({
    name: 'provider_give_ups_total',
    help: 'Provider calls that ended without an answer (outcome unknown), by reason.',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });

  readonly providerEvents = new Counter({
    name: 'provider_events_total',
    help: 'Provider events received, by result: applied, noted, duplicate, stale, unknown_charge, unknown_refund, rejected (bad signature).',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });

  readonly prunedKeys = new Counter({
    name: 'idempotency_keys_pruned_total',
    help: 'Expired idempotency keys deleted by the worker.',
    registers: [this.registry],
  });

  readonly expiredKeysBacklog = new Gauge({
    name: 'idempotency_keys_expired_backlog',
    help: 'Expired keys left after the last prune run (0 when it emptied the backlog; counted up to 1,000,000).',
    registers: [this.registry],
  });

  readonly retentionPruned = new Counter({
    name: 'retention_pruned_total',
    help: 'Rows past their retention deleted by the worker, by table: events, webhook_deliveries, processed_messages.',
    labelNames: ['table'] as const,
    registers: [this.registry],
  });

  readonly retentionBacklog = new Gauge({
    name: 'retention_backlog',
    help:
      'Rows past their retention left after the last prune run, by table: events (kept for a pending delivery not counted), ' +
      'processed_messages (0 when the run emptied the backlog; counted up to 1,000,000).',
    labelNames: ['table'] as const,
    registers: [this.registry],
  });

  readonly webhookAttempts = new Counter({
    name: 'webhook_attempts_total',
    help: 'Merchant webhook sends, by result: delivered (2xx), retry (no 2xx, tried again later), failed (no 2xx, past the horizon).',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });

  readonly webhookDeliveryLatency = new Histogram({
    name: 'webhook_delivery_latency_seconds',
    help: "From an event's commit to its endpoint's 2xx, retries included.",
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 3600],
    registers: [this.registry],
  });

  readonly reconcileOutcomes = new Counter({
    name: 'reconcile_outcomes_total',
    help:
      'Payments a reconcile job worked on, by outcome: settled (a final answer recorded), postponed (tried again later), ' +
      'requires_review (handed to a person), skipped (decided, leased or postponed by someone else since it was queued).',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });

  readonly idempotencyConflicts = new Counter({
    name: 'idempotency_conflicts_total',
    help: 'Requests answered 409 idempotency_key_in_use or 422 idempotency_key_reused, by code.',
    labelNames: ['code'] as const,
    registers: [this.registry],
  });

  // The worker's database-wide gauges (SafetyNetGauges): every worker computes
  // the same values, so aggregate them across workers with max, never sum.

  readonly paymentsPending = new Gauge({
    name: 'payments_pending',
    help: 'Payments pending (outcome not known yet), database-wide; every worker reports the same value.',
    registers: [this.registry],
  });

  readonly paymentsOldestPendingAge = new Gauge({
    name: 'payments_oldest_pending_age_seconds',
    help: 'Age of the oldest pending payment (0 when none), database-wide; every worker reports the same value.',
    registers: [this.registry],
  });

  readonly paymentsRequiresReview = new Gauge({
    name: 'payments_requires_review',
    help: 'Payments in requires_review, database-wide; every worker reports the same value.',
    registers: [this.registry],
  });

  readonly refundsPending = new Gauge({
    name: 'refunds_pending',
    help: 'Refunds pending (outcome not known yet), database-wide; every worker reports the same value.',
    registers: [this.registry],
  });

  readonly refundsRequiresReview = new Gauge({
    name: 'refunds_requires_review',
    help: 'Refunds in requires_review, database-wide; every worker reports the same value.',
    registers: [this.registry],
  });

  readonly webhookDeliveriesPending = new Gauge({
    name: 'webhook_deliveries_pending',
    help: 'Merchant webhook deliveries not yet delivered nor failed, database-wide; every worker reports the same value.',
    registers: [this.registry],
  });

  readonly webhookOldestPendingAge = new Gauge({
    name: 'webhook_oldest_pending_age_seconds',
    help: 'Age of the oldest pending webhook delivery (0 when none), database-wide; every worker reports the same value.',
    registers: [this.registry],
  });

  readonly queueJobs = new Gauge({
    name: 'queue_jobs',
    help: "BullMQ jobs of the worker's queues, by queue and state; every worker reports the same value.",
    labelNames: ['queue', 'state'] as const,
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry });
    // Every series exists from the start at 0, so rate() and increase() see the first one.
    for (const outcome of RECONCILE_OUTCOMES) this.reconcileOutcomes.inc({ outcome }, 0);
  }
}
