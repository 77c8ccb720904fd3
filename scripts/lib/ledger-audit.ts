import type { PaymentStatus } from '../../src/ledger/payments.table';
import type { Charge, ChargeStatus } from '../../src/mock-provider/mock-provider.types';

/**
 * The ledger audit's rules, as a pure function: rows of our payments table and
 * of the provider's ledger in, findings out. Reading the rows (and the order
 * the reads must happen in) is scripts/audit.ts's job; deciding is this file's.
 */

/** One row of the payments table, with its key's lease; times in epoch ms on Postgres's clock. */
export interface LedgerPayment {
  id: string;
  clientId: string;
  orderId: string | null;
  status: PaymentStatus;
  amount: number;
  currency: string;
  providerKey: string;
  providerChargeId: string | null;
  createdAt: number;
  nextReconcileAt: number;
  /** Whether the payment still has its idempotency key (only keys of final payments are ever pruned). */
  hasKey: boolean;
  /** End of the key's lease; null when no lease is held. */
  leasedUntil: number | null;
}

export interface LedgerInput {
  /** Postgres's now() at the read of the payments: every time in `payments` is on that clock. */
  now: number;
  payments: readonly LedgerPayment[];
  /** The provider's ledger, read after the payments. */
  charges: readonly Charge[];
  /**
   * Ids of the charges the provider held before the payments were read. Only
   * those can be called orphans: a charge is made after its payment commits,
   * so a charge seen before the read has its payment in the read, while a
   * later one may belong to a payment created since.
   */
  chargesReadBeforePayments: ReadonlySet<string>;
  /** Payment ids with a reconcile job waiting, delayed or running in BullMQ. */
  queuedReconciliations: ReadonlySet<string>;
  /** The provider events the provider saw answered with a 2xx, read before `processedEvents`. */
  acknowledgedEvents: readonly { id: string; providerKey: string }[];
  /** Ids of the provider events the API recorded as processed (applied, or acknowledged as stale or duplicate). */
  processedEvents: ReadonlySet<string>;
  staleAfterMs: number;
  sweepIntervalMs: number;
  /** Slack for a sweep that runs late (a busy worker, a slow Redis) before "overdue" counts. */
  graceMs: number;
  /** Examples kept per kind of violation. */
  maxExamples: number;
}

export const VIOLATION_KINDS = [
  /** A succeeded payment with no succeeded charge at the provider. */
  'succeeded_without_charge',
  /** A payment with more than one succeeded charge. */
  'double_charge',
  /** Two payments of one client's order that both hold a succeeded charge. */
  'order_charged_twice',
  /** A charge whose amount, currency, id or reference disagrees with its payment. */
  'charge_mismatch',
  /** A charge that belongs to no payment, by provider key or by reference. */
  'orphan_charge',
  /** A failed payment whose charge succeeded: money moved, the client was told it did not. */
  'failed_with_succeeded_charge',
  /** A pending payment past the stale threshold that nothing will pick up (see `scheduleOf`). */
  'stale_pending_unscheduled',
  /**
   * A payment still in review although the provider's charge for it is final
   * and its review re-check has had its chance (it is overdue and not queued).
   */
  'review_behind_provider',
  /**
   * A provider event the API answered with a 2xx but has no record of: the
   * 2xx must come only after the event's effect (or its staleness) committed.
   */
  'acknowledged_event_unrecorded',
] as const;
type ViolationKind = (typeof VIOLATION_KINDS)[number];

export type Example = Record<string, string | number | null>;

export interface AuditReport {
  ok: boolean;
  payments: { total: number } & Record<PaymentStatus, number>;
  charges: { total: number } & Record<ChargeStatus, number>;
  /** Payments a person must review although their charge succeeded: legal, but worth a look. */
  requires_review_charged: number;
  violations: Record<ViolationKind, { count: number; examples: Example[] }>;
}

/**
 * When a pending payment will next be looked at, in epoch ms. The sweep takes
 * a pending payment once it is older than the stale threshold, due on its
 * ladder (next_reconcile_at) and not leased; so it is due at the latest of
 * those three times. A live lease is a request or a worker working on it now,
 * and the lease's end is when the sweep may take over if that holder died.
 */
export function dueAt(payment: LedgerPayment, staleAfterMs: number): number {
  return Math.max(payment.createdAt + staleAfterMs, payment.nextReconcileAt, payment.leasedUntil ?? -Infinity);
}

/**
 * "Reconciliation is scheduled" for a pending payment past the stale threshold
 * means one of:
 *   - a reconcile job for it is in BullMQ (waiting, delayed, prioritized or active), or
 *   - it has its key and is due (see `dueAt`) no earlier than one sweep
 *     interval plus the grace ago: it is leased, or waiting on its ladder, or
 *     the next sweep will find it.
 * Anything else is a payment the system has forgotten.
 */
function scheduleOf(payment: LedgerPayment, input: LedgerInput): Example | undefined {
  if (input.queuedReconciliations.has(payment.id)) return undefined;
  if (!payment.hasKey) {
    // The sweep finds payments through their key; without one it never will.
    return { payment_id: payment.id, reason: 'no idempotency key', age_ms: input.now - payment.createdAt };
  }
  const overdueMs = input.now - dueAt(payment, input.staleAfterMs);
  if (overdueMs <= input.sweepIntervalMs + input.graceMs) return undefined;
  return { payment_id: payment.id, reason: 'overdue and not queued', overdue_ms: Math.round(overdueMs) };
}

export function auditLedger(input: LedgerInput): AuditReport {
  const violations = Object.fromEntries(
    VIOLATION_KINDS.map((kind) => [kind, { count: 0, examples: [] as Example[] }]),
  ) as AuditReport['violations'];
  const flag = (kind: ViolationKind, example: Example) => {
    const entry = violations[kind];
    entry.count++;
    if (entry.examples.length < input.maxExamples) entry.examples.push(example);
  };

  const byId = new Map(input.payments.map((payment) => [payment.id, payment]));
  const byProviderKey = new Map(input.payments.map((payment) => [payment.providerKey, payment]));

  // Each charge belongs to the payment whose provider key it was made under,
  // or failing that to the payment its reference names.
  const chargesOf = new Map<string, Charge[]>();
  for (const charge of input.charges) {
    const owner = byProviderKey.get(charge.idempotency_key) ?? byId.get(charge.reference);
    if (!owner) {
      if (input.chargesReadBeforePayments.has(charge.id)) {
        flag('orphan_charge', {
          charge_id: charge.id,
          idempotency_key: charge.idempotency_key,
          reference: charge.reference,
          status: charge.status,
        });
      }
      continue;
    }
    const problem = mismatchOf(owner, charge);
    if (problem) flag('charge_mismatch', { payment_id: owner.id, charge_id: charge.id, problem });
    append(chargesOf, owner.id, charge);
  }

  let requiresReviewCharged = 0;
  const chargedByOrder = new Map<string, string[]>();
  for (const payment of input.payments) {
    const succeeded = (chargesOf.get(payment.id) ?? []).filter((charge) => charge.status === 'succeeded');
    if (succeeded.length > 1) {
      flag('double_charge', { payment_id: payment.id, charges: succeeded.map((charge) => charge.id).join(',') });
    }
    if (succeeded.length > 0 && payment.orderId !== null) {
      append(chargedByOrder, `${payment.clientId}/${payment.orderId}`, payment.id);
    }
    switch (payment.status) {
      case 'succeeded':
        if (succeeded.length === 0) flag('succeeded_without_charge', { payment_id: payment.id });
        else if (succeeded.length === 1 && succeeded[0].id !== payment.providerChargeId) {
          flag('charge_mismatch', {
            payment_id: payment.id,
            charge_id: succeeded[0].id,
            problem: `provider_charge_id is ${payment.providerChargeId}`,
          });
        }
        break;
      case 'failed':
        if (succeeded.length > 0) {
          flag('failed_with_succeeded_charge', { payment_id: payment.id, charge_id: succeeded[0].id });
        }
        break;
      case 'requires_review': {
        if (succeeded.length > 0) requiresReviewCharged++;
        const final = (chargesOf.get(payment.id) ?? []).find(
          (charge) => charge.status !== 'pending' && mismatchOf(payment, charge) === undefined,
        );
        const overdue = final && scheduleOf(payment, input);
        if (final && overdue) {
          flag('review_behind_provider', { ...overdue, charge_id: final.id, charge_status: final.status });
        }
        break;
      }
      case 'pending': {
        if (input.now - payment.createdAt < input.staleAfterMs) break;
        const unscheduled = scheduleOf(payment, input);
        if (unscheduled) flag('stale_pending_unscheduled', unscheduled);
        break;
      }
    }
  }
  // An event for a charge of no payment is acknowledged and recorded nowhere: it has nothing to apply.
  for (const event of input.acknowledgedEvents) {
    if (byProviderKey.has(event.providerKey) && !input.processedEvents.has(event.id)) {
      flag('acknowledged_event_unrecorded', { event_id: event.id });
    }
  }
  for (const [order, paymentIds] of chargedByOrder) {
    if (paymentIds.length > 1) flag('order_charged_twice', { order, payments: paymentIds.join(',') });
  }

  return {
    ok: VIOLATION_KINDS.every((kind) => violations[kind].count === 0),
    payments: {
      total: input.payments.length,
      ...countBy(input.payments, (payment) => payment.status, ['pending', 'succeeded', 'failed', 'requires_review']),
    },
    charges: {
      total: input.charges.length,
      ...countBy(input.charges, (charge) => charge.status, ['pending', 'succeeded', 'failed']),
    },
    requires_review_charged: requiresReviewCharged,
    violations,
  };
}

/** What disagrees between a payment and one of its charges, if anything. */
function mismatchOf(payment: LedgerPayment, charge: Charge): string | undefined {
  const problems: string[] = [];
  if (charge.idempotency_key !== payment.providerKey) problems.push(`idempotency_key ${charge.idempotency_key}`);
  if (charge.reference !== payment.id) problems.push(`reference ${charge.reference}`);
  if (charge.amount !== payment.amount) problems.push(`amount ${charge.amount} (payment ${payment.amount})`);
  if (charge.currency !== payment.currency) problems.push(`currency ${charge.currency} (payment ${payment.currency})`);
  return problems.length > 0 ? problems.join('; ') : undefined;
}

function append<V>(map: Map<string, V[]>, key: string, value: V): void {
  const list = map.get(key);
  if (list) list.push(value);
  else map.set(key, [value]);
}

function countBy<T, K extends string>(items: readonly T[], keyOf: (item: T) => K, keys: readonly K[]): Record<K, number> {
  const counts = Object.fromEntries(keys.map((key) => [key, 0])) as Record<K, number>;
  for (const item of items) counts[keyOf(item)]++;
  return counts;
}
