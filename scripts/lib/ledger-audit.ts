import type { OperationStatus } from '../../src/ledger/operation';
import type { PaymentStatus } from '../../src/ledger/payments.table';
import type {
  Charge,
  ChargeStatus,
  Refund as ProviderRefund,
  RefundStatus as ProviderRefundStatus,
} from '../../src/mock-provider/mock-provider.types';

/**
 * The ledger audit's rules, as a pure function: rows of our payments and
 * refunds tables and of the provider's ledger (charges and refunds) in,
 * findings out. Reading the rows (and the order
 * the reads must happen in) is scripts/audit.ts's job; deciding is this file's.
 */

/** What the reconciliation sweep needs of an undecided row (a payment or a refund) to find it; times in epoch ms. */
interface Schedulable {
  id: string;
  createdAt: number;
  nextReconcileAt: number;
  /** Whether the row still has its idempotency key (only keys of final rows are ever pruned). */
  hasKey: boolean;
  /** End of the key's lease; null when no lease is held. */
  leasedUntil: number | null;
}

/** One row of the payments table, with its key's lease; times in epoch ms on Postgres's clock. */
export interface LedgerPayment extends Schedulable {
  id: string;
  clientId: string;
  orderId: string | null;
  status: PaymentStatus;
  amount: number;
  currency: string;
  providerKey: string;
  providerChargeId: string | null;
  /** What its refunds not failed hold back (amount_reserved), and what its succeeded refunds gave back (amount_refunded). */
  amountReserved: number;
  amountRefunded: number;
}

/** One row of the refunds table, with its key's lease; times in epoch ms on Postgres's clock. */
export interface LedgerRefund extends Schedulable {
  clientId: string;
  paymentId: string;
  amount: number;
  status: OperationStatus;
  providerKey: string;
  /** The payment's charge, which the refund is made on. */
  providerChargeId: string;
  providerRefundId: string | null;
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
  /** Payment and refund ids with a reconcile job waiting, delayed or running in BullMQ. */
  queuedReconciliations: ReadonlySet<string>;
  /** The provider events the provider saw answered with a 2xx, read before `processedEvents`. */
  acknowledgedEvents: readonly { id: string; providerKey: string }[];
  /** Ids of the provider events the API recorded as processed (applied, or acknowledged as stale or duplicate). */
  processedEvents: ReadonlySet<string>;
  /** The refunds table, read in the same snapshot as the payments (their sums must agree). */
  refunds: readonly LedgerRefund[];
  /** The provider's refunds, read after the refunds. */
  providerRefunds: readonly ProviderRefund[];
  /** Ids of the provider refunds held before the refunds were read: only those can be orphans (as for charges). */
  providerRefundsReadBeforeRefunds: ReadonlySet<string>;
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
  /** A pending payment or refund past the stale threshold that nothing will pick up (see `scheduleOf`). */
  'stale_pending_unscheduled',
  /**
   * A payment (or refund) still in review although the provider's charge (or
   * refund) for it is final and its review re-check has had its chance (it is
   * overdue and not queued).
   */
  'review_behind_provider',
  /**
   * A provider event the API answered with a 2xx but has no record of: the
   * 2xx must come only after the event's effect (or its staleness) committed.
   */
  'acknowledged_event_unrecorded',
  /** More than one provider refund for one refund (by reference), or under one provider key: money given back twice. */
  'double_refund',
  /** A provider refund that belongs to no refund, by provider key or by reference. */
  'orphan_refund',
  /**
   * More given back than was taken: a payment whose refunds not failed sum
   * above its amount, or a provider charge whose provider refunds not failed
   * sum above the charge's amount.
   */
  'over_refund',
  /** A provider refund whose amount, charge, key or reference disagrees with its refund, or a refund that names another charge or provider refund. */
  'refund_mismatch',
  /**
   * A final refund the provider disagrees with: succeeded here with no
   * succeeded refund at the provider (failed, pending or absent there), or
   * failed here while the provider's refund succeeded or may still (pending).
   */
  'refund_status_mismatch',
  /** A payment whose amount_reserved or amount_refunded is not the sum of its refunds not failed, or succeeded. */
  'refund_sums_mismatch',
] as const;
type ViolationKind = (typeof VIOLATION_KINDS)[number];

export type Example = Record<string, string | number | null>;

export interface AuditReport {
  ok: boolean;
  payments: { total: number } & Record<PaymentStatus, number>;
  charges: { total: number } & Record<ChargeStatus, number>;
  refunds: { total: number } & Record<OperationStatus, number>;
  provider_refunds: { total: number } & Record<ProviderRefundStatus, number>;
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
export function dueAt(row: Schedulable, staleAfterMs: number): number {
  return Math.max(row.createdAt + staleAfterMs, row.nextReconcileAt, row.leasedUntil ?? -Infinity);
}

/**
 * "Reconciliation is scheduled" for a pending payment (or refund: the sweep
 * covers both alike) past the stale threshold means one of:
 *   - a reconcile job for it is in BullMQ (waiting, delayed, prioritized or active), or
 *   - it has its key and is due (see `dueAt`) no earlier than one sweep
 *     interval plus the grace ago: it is leased, or waiting on its ladder, or
 *     the next sweep will find it.
 * Anything else is a payment the system has forgotten.
 */
function scheduleOf(row: Schedulable, input: LedgerInput, idField = 'payment_id'): Example | undefined {
  if (input.queuedReconciliations.has(row.id)) return undefined;
  if (!row.hasKey) {
    // The sweep finds rows through their key; without one it never will.
    return { [idField]: row.id, reason: 'no idempotency key', age_ms: input.now - row.createdAt };
  }
  const overdueMs = input.now - dueAt(row, input.staleAfterMs);
  if (overdueMs <= input.sweepIntervalMs + input.graceMs) return undefined;
  return { [idField]: row.id, reason: 'overdue and not queued', overdue_ms: Math.round(overdueMs) };
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
  const refundByProviderKey = auditRefunds(input, flag);
  // An event for a charge (or refund) of no payment (or refund) is acknowledged and recorded nowhere: it has nothing to apply.
  for (const event of input.acknowledgedEvents) {
    const ours = byProviderKey.has(event.providerKey) || refundByProviderKey.has(event.providerKey);
    if (ours && !input.processedEvents.has(event.id)) {
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
    refunds: {
      total: input.refunds.length,
      ...countBy(input.refunds, (refund) => refund.status, ['pending', 'succeeded', 'failed', 'requires_review']),
    },
    provider_refunds: {
      total: input.providerRefunds.length,
      ...countBy(input.providerRefunds, (refund) => refund.status, ['pending', 'succeeded', 'failed']),
    },
    requires_review_charged: requiresReviewCharged,
    violations,
  };
}

type Flag = (kind: ViolationKind, example: Example) => void;

/**
 * The refund rules, as the payment rules above read charges: each provider
 * refund belongs to the refund whose provider key it was made under, or
 * failing that to the refund its reference names. Returns the refunds by
 * provider key (an acknowledged refund event is judged by it).
 */
function auditRefunds(input: LedgerInput, flag: Flag): Map<string, LedgerRefund> {
  const byId = new Map(input.refunds.map((refund) => [refund.id, refund]));
  const byProviderKey = new Map(input.refunds.map((refund) => [refund.providerKey, refund]));
  const paymentOf = new Map(input.payments.map((payment) => [`${payment.clientId}/${payment.id}`, payment]));
  const chargeById = new Map(input.charges.map((charge) => [charge.id, charge]));

  const providerRefundsOf = new Map<string, ProviderRefund[]>();
  const byKey = new Map<string, ProviderRefund[]>();
  const byCharge = new Map<string, ProviderRefund[]>();
  for (const made of input.providerRefunds) {
    append(byKey, made.idempotency_key, made);
    append(byCharge, made.charge, made);
    const owner = byProviderKey.get(made.idempotency_key) ?? byId.get(made.reference);
    if (!owner) {
      if (input.providerRefundsReadBeforeRefunds.has(made.id)) {
        flag('orphan_refund', {
          provider_refund_id: made.id,
          idempotency_key: made.idempotency_key,
          reference: made.reference,
          charge: made.charge,
          amount: made.amount,
          status: made.status,
        });
      }
      continue;
    }
    const problem = refundMismatchOf(owner, made);
    if (problem) flag('refund_mismatch', { refund_id: owner.id, provider_refund_id: made.id, problem });
    append(providerRefundsOf, owner.id, made);
  }
  // The provider's key is its idempotency: two refunds under one key is the provider refunding twice.
  for (const [key, made] of byKey) {
    if (made.length > 1) flag('double_refund', { idempotency_key: key, provider_refunds: made.map((r) => r.id).join(',') });
  }
  for (const [chargeId, made] of byCharge) {
    const charge = chargeById.get(chargeId);
    const refunded = sumOf(made.filter((r) => r.status !== 'failed'));
    if (charge && refunded > charge.amount) {
      flag('over_refund', { charge_id: chargeId, amount: charge.amount, refunds_not_failed: refunded, provider_refunds: made.length });
    }
  }

  const refundsOfPayment = new Map<string, LedgerRefund[]>();
  for (const refund of input.refunds) {
    append(refundsOfPayment, `${refund.clientId}/${refund.paymentId}`, refund);
    const made = providerRefundsOf.get(refund.id) ?? [];
    if (made.length > 1) flag('double_refund', { refund_id: refund.id, provider_refunds: made.map((r) => r.id).join(',') });
    const payment = paymentOf.get(`${refund.clientId}/${refund.paymentId}`);
    if (payment && payment.providerChargeId !== refund.providerChargeId) {
      flag('refund_mismatch', {
        refund_id: refund.id,
        provider_refund_id: null,
        problem: `provider_charge_id ${refund.providerChargeId} (payment ${payment.providerChargeId})`,
      });
    }
    const succeeded = made.filter((r) => r.status === 'succeeded');
    switch (refund.status) {
      case 'succeeded':
        if (succeeded.length === 0) {
          flag('refund_status_mismatch', {
            refund_id: refund.id,
            status: refund.status,
            provider_status: made.map((r) => r.status).join(',') || 'absent',
          });
        } else if (succeeded.length === 1 && succeeded[0].id !== refund.providerRefundId) {
          flag('refund_mismatch', {
            refund_id: refund.id,
            provider_refund_id: succeeded[0].id,
            problem: `provider_refund_id is ${refund.providerRefundId}`,
          });
        }
        break;
      case 'failed': {
        // A pending provider refund may still succeed: failed here, refunded there.
        const moving = made.filter((r) => r.status !== 'failed');
        if (moving.length > 0) {
          flag('refund_status_mismatch', {
            refund_id: refund.id,
            status: refund.status,
            provider_status: moving.map((r) => r.status).join(','),
          });
        }
        break;
      }
      case 'requires_review': {
        const final = made.find((r) => r.status !== 'pending' && refundMismatchOf(refund, r) === undefined);
        const overdue = final && scheduleOf(refund, input, 'refund_id');
        if (final && overdue) {
          flag('review_behind_provider', { ...overdue, provider_refund_id: final.id, provider_status: final.status });
        }
        break;
      }
      case 'pending': {
        if (input.now - refund.createdAt < input.staleAfterMs) break;
        const unscheduled = scheduleOf(refund, input, 'refund_id');
        if (unscheduled) flag('stale_pending_unscheduled', unscheduled);
        break;
      }
    }
  }

  for (const payment of input.payments) {
    const refunds = refundsOfPayment.get(`${payment.clientId}/${payment.id}`) ?? [];
    const reserved = sumOf(refunds.filter((refund) => refund.status !== 'failed'));
    const refunded = sumOf(refunds.filter((refund) => refund.status === 'succeeded'));
    if (reserved > payment.amount) {
      flag('over_refund', { payment_id: payment.id, amount: payment.amount, refunds_not_failed: reserved, refunds: refunds.length });
    }
    if (payment.amountReserved !== reserved || payment.amountRefunded !== refunded) {
      flag('refund_sums_mismatch', {
        payment_id: payment.id,
        amount_reserved: payment.amountReserved,
        refunds_not_failed: reserved,
        amount_refunded: payment.amountRefunded,
        refunds_succeeded: refunded,
      });
    }
  }
  return byProviderKey;
}

/** What disagrees between a refund and one of its provider refunds, if anything. */
function refundMismatchOf(refund: LedgerRefund, made: ProviderRefund): string | undefined {
  const problems: string[] = [];
  if (made.idempotency_key !== refund.providerKey) problems.push(`idempotency_key ${made.idempotency_key}`);
  if (made.reference !== refund.id) problems.push(`reference ${made.reference}`);
  if (made.amount !== refund.amount) problems.push(`amount ${made.amount} (refund ${refund.amount})`);
  if (made.charge !== refund.providerChargeId) problems.push(`charge ${made.charge} (refund ${refund.providerChargeId})`);
  return problems.length > 0 ? problems.join('; ') : undefined;
}

function sumOf(items: readonly { amount: number }[]): number {
  return items.reduce((sum, item) => sum + item.amount, 0);
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
