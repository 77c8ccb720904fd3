import type { Charge, Refund as ProviderRefund } from '../../src/mock-provider/mock-provider.types';
import { type LedgerInput, type LedgerPayment, type LedgerRefund, VIOLATION_KINDS, auditLedger, dueAt } from './ledger-audit';

const NOW = Date.parse('2026-01-01T12:00:00Z');
const STALE = 60_000;
const SWEEP = 10_000;
const GRACE = 5_000;

function payment(id: string, overrides: Partial<LedgerPayment> = {}): LedgerPayment {
  return {
    id,
    clientId: 'client_1',
    orderId: null,
    status: 'succeeded',
    amount: 500,
    currency: 'USD',
    providerKey: `pk_${id}`,
    providerChargeId: `ch_${id}`,
    createdAt: NOW - 1_000,
    nextReconcileAt: NOW - 1_000,
    hasKey: true,
    leasedUntil: null,
    amountReserved: 0,
    amountRefunded: 0,
    ...overrides,
  };
}

/** The charge the provider holds for a payment, in agreement with it unless overridden. */
function chargeOf(p: LedgerPayment, overrides: Partial<Charge> = {}): Charge {
  return {
    id: p.providerChargeId ?? `ch_${p.id}`,
    status: 'succeeded',
    amount: p.amount,
    currency: p.currency,
    failure_code: null,
    reference: p.id,
    idempotency_key: p.providerKey,
    created_at: new Date(p.createdAt).toISOString(),
    ...overrides,
  };
}

function sut(payments: LedgerPayment[], charges: Charge[], overrides: Partial<LedgerInput> = {}) {
  return auditLedger({
    now: NOW,
    payments,
    charges,
    chargesReadBeforePayments: new Set(charges.map((charge) => charge.id)),
    queuedReconciliations: new Set(),
    acknowledgedEvents: [],
    processedEvents: new Set(),
    staleAfterMs: STALE,
    sweepIntervalMs: SWEEP,
    graceMs: GRACE,
    maxExamples: 3,
    refunds: [],
    providerRefunds: [],
    providerRefundsReadBeforeRefunds: new Set((overrides.providerRefunds ?? []).map((made) => made.id)),
    ...overrides,
  });
}

/** The kinds that were flagged, with their counts: what a test expects, and that nothing else was. */
function flagged(report: ReturnType<typeof auditLedger>): Record<string, number> {
  return Object.fromEntries(
    VIOLATION_KINDS.filter((kind) => report.violations[kind].count > 0).map((kind) => [kind, report.violations[kind].count]),
  );
}

describe('auditLedger', () => {
  it('passes a consistent ledger of every status and counts it', () => {
    const ok = payment('a');
    const declined = payment('b', { status: 'failed', providerChargeId: 'ch_b' });
    const fresh = payment('c', { status: 'pending', providerChargeId: null, createdAt: NOW - 10 });
    const review = payment('d', { status: 'requires_review', providerChargeId: null });
    const report = sut(
      [ok, declined, fresh, review],
      [chargeOf(ok), chargeOf(declined, { status: 'failed', failure_code: 'card_declined' })],
    );

    expect(report).toEqual({
      ok: true,
      payments: { total: 4, pending: 1, succeeded: 1, failed: 1, requires_review: 1 },
      charges: { total: 2, pending: 0, succeeded: 1, failed: 1 },
      refunds: { total: 0, pending: 0, succeeded: 0, failed: 0, requires_review: 0 },
      provider_refunds: { total: 0, pending: 0, succeeded: 0, failed: 0 },
      requires_review_charged: 0,
      violations: Object.fromEntries(VIOLATION_KINDS.map((kind) => [kind, { count: 0, examples: [] }])),
    });
  });

  it('flags a succeeded payment the provider never charged', () => {
    const report = sut([payment('a')], []);

    expect(report.ok).toBe(false);
    expect(flagged(report)).toEqual({ succeeded_without_charge: 1 });
    expect(report.violations.succeeded_without_charge.examples).toEqual([{ payment_id: 'a' }]);
  });

  it('does not count a failed or pending charge as the charge of a succeeded payment', () => {
    const p = payment('a');
    expect(flagged(sut([p], [chargeOf(p, { status: 'failed' })]))).toEqual({ succeeded_without_charge: 1 });
    expect(flagged(sut([p], [chargeOf(p, { status: 'pending' })]))).toEqual({ succeeded_without_charge: 1 });
  });

  it('flags a second succeeded charge for one payment, found by its reference', () => {
    const p = payment('a');
    const stray = chargeOf(p, { id: 'ch_other', idempotency_key: 'pk_someone_else' });
    const report = sut([p], [chargeOf(p), stray]);

    expect(flagged(report)).toEqual({ double_charge: 1, charge_mismatch: 1 });
    expect(report.violations.double_charge.examples).toEqual([{ payment_id: 'a', charges: 'ch_a,ch_other' }]);
  });

  it.each([
    ['amount', { amount: 900 }, 'amount 900 (payment 500)'],
    ['currency', { currency: 'EUR' }, 'currency EUR (payment USD)'],
    ['reference', { reference: 'zzz' }, 'reference zzz'],
  ])('flags a charge whose %s disagrees with its payment', (_field, overrides, problem) => {
    const p = payment('a');
    const report = sut([p], [chargeOf(p, overrides)]);

    expect(flagged(report)).toEqual({ charge_mismatch: 1 });
    expect(report.violations.charge_mismatch.examples).toEqual([{ payment_id: 'a', charge_id: 'ch_a', problem }]);
  });

  it('flags a succeeded payment that names another charge than the one the provider holds', () => {
    const p = payment('a', { providerChargeId: 'ch_forged' });
    const report = sut([p], [chargeOf(p, { id: 'ch_real' })]);

    expect(flagged(report)).toEqual({ charge_mismatch: 1 });
    expect(report.violations.charge_mismatch.examples[0]).toMatchObject({ problem: 'provider_charge_id is ch_forged' });
  });

  it('flags a charge that belongs to no payment, whatever its status', () => {
    const ghost = chargeOf(payment('ghost'), { status: 'failed' });
    const report = sut([], [ghost]);

    expect(flagged(report)).toEqual({ orphan_charge: 1 });
    expect(report.violations.orphan_charge.examples).toEqual([
      { charge_id: 'ch_ghost', idempotency_key: 'pk_ghost', reference: 'ghost', status: 'failed' },
    ]);
  });

  it('does not call a charge made after the payments were read an orphan', () => {
    const late = chargeOf(payment('late'));
    expect(sut([], [late], { chargesReadBeforePayments: new Set() }).ok).toBe(true);
  });

  it('flags a failed payment whose charge succeeded', () => {
    const p = payment('a', { status: 'failed' });
    const report = sut([p], [chargeOf(p)]);

    expect(flagged(report)).toEqual({ failed_with_succeeded_charge: 1 });
  });

  it('flags two charged payments for one order of one client, and not for two clients', () => {
    const first = payment('a', { orderId: 'ord_1' });
    const second = payment('b', { orderId: 'ord_1' });
    const elsewhere = payment('c', { orderId: 'ord_1', clientId: 'client_2' });
    const report = sut([first, second, elsewhere], [chargeOf(first), chargeOf(second), chargeOf(elsewhere)]);

    expect(flagged(report)).toEqual({ order_charged_twice: 1 });
    expect(report.violations.order_charged_twice.examples).toEqual([{ order: 'client_1/ord_1', payments: 'a,b' }]);
  });

  it('counts a payment under review whose charge succeeded, without calling it a violation', () => {
    const p = payment('a', { status: 'requires_review', providerChargeId: null });
    const report = sut([p], [chargeOf(p, { id: 'ch_x' })]);

    expect(report.ok).toBe(true);
    expect(report.requires_review_charged).toBe(1);
  });

  it('keeps at most maxExamples examples but counts every violation', () => {
    const report = sut(['a', 'b', 'c', 'd', 'e'].map((id) => payment(id)), []);

    expect(report.violations.succeeded_without_charge.count).toBe(5);
    expect(report.violations.succeeded_without_charge.examples).toHaveLength(3);
  });

  it('flags a provider event of a payment answered with a 2xx that the API has no record of', () => {
    const pending = payment('pay_1', { status: 'pending' });
    const acknowledgedEvents = ['evt_1', 'evt_2'].map((id) => ({ id, providerKey: pending.providerKey }));
    const report = sut([pending], [], { acknowledgedEvents, processedEvents: new Set(['evt_1', 'evt_3']) });

    expect(flagged(report)).toEqual({ acknowledged_event_unrecorded: 1 });
    expect(report.violations.acknowledged_event_unrecorded.examples).toEqual([{ event_id: 'evt_2' }]);
  });

  it('flags no event of a charge that belongs to no payment: it had nothing to apply, and is recorded nowhere', () => {
    const report = sut([], [], { acknowledgedEvents: [{ id: 'evt_1', providerKey: 'pk_pay_ghost' }] });

    expect(flagged(report)).toEqual({});
  });

  describe('a payment in review', () => {
    const created = NOW - STALE - 60_000;
    const inReview = (overrides: Partial<LedgerPayment> = {}) =>
      payment('r', { status: 'requires_review', providerChargeId: null, createdAt: created, ...overrides });

    it('is behind the provider once its charge is final and its re-check is overdue and not queued', () => {
      const r = inReview({ nextReconcileAt: NOW - SWEEP - GRACE - 1 });

      const report = sut([r], [chargeOf(r, { id: 'ch_r' })]);

      expect(flagged(report)).toEqual({ review_behind_provider: 1 });
      expect(report.violations.review_behind_provider.examples[0]).toMatchObject({
        payment_id: 'r',
        charge_id: 'ch_r',
        charge_status: 'succeeded',
      });
    });

    it.each([
      ['its re-check is still to come', { nextReconcileAt: NOW + 1_000 }, 'succeeded'],
      ['its charge is still pending', { nextReconcileAt: NOW - SWEEP - GRACE - 1 }, 'pending'],
    ] as const)('is not flagged while %s', (_case, overrides, status) => {
      const r = inReview(overrides);
      expect(flagged(sut([r], [chargeOf(r, { status })]))).toEqual({});
    });

    it('is not flagged while its re-check is queued', () => {
      const r = inReview({ nextReconcileAt: NOW - SWEEP - GRACE - 1 });
      expect(flagged(sut([r], [chargeOf(r)], { queuedReconciliations: new Set(['r']) }))).toEqual({});
    });
  });

  describe('a pending payment past the stale threshold', () => {
    const created = NOW - STALE - 60_000;
    const stale = (overrides: Partial<LedgerPayment> = {}) =>
      payment('p', { status: 'pending', providerChargeId: null, createdAt: created, nextReconcileAt: created, ...overrides });

    it('is due at the latest of stale age, ladder and lease', () => {
      const p = stale({ nextReconcileAt: NOW + 5, leasedUntil: NOW + 9 });
      expect(dueAt(p, STALE)).toBe(NOW + 9);
      expect(dueAt(stale(), STALE)).toBe(NOW - 60_000);
    });

    it('is flagged when it became due more than a sweep interval plus the grace ago and is not queued', () => {
      const report = sut([stale({ nextReconcileAt: NOW - SWEEP - GRACE - 1 })], []);

      expect(flagged(report)).toEqual({ stale_pending_unscheduled: 1 });
      expect(report.violations.stale_pending_unscheduled.examples).toEqual([
        { payment_id: 'p', reason: 'overdue and not queued', overdue_ms: SWEEP + GRACE + 1 },
      ]);
    });

    it.each([
      ['it became due one sweep interval plus the grace ago', { createdAt: NOW - STALE - SWEEP - GRACE, nextReconcileAt: 0 }],
      ['it waits on its ladder', { nextReconcileAt: NOW + 1_000 }],
      ['a request or a worker holds its lease', { leasedUntil: NOW + 1_000 }],
      ['its lease ended one sweep interval ago', { leasedUntil: NOW - SWEEP }],
    ])('is scheduled when %s', (_why, overrides) => {
      expect(sut([stale(overrides)], []).ok).toBe(true);
    });

    it('is scheduled when a reconcile job for it is queued, however overdue', () => {
      expect(sut([stale()], [], { queuedReconciliations: new Set(['p']) }).ok).toBe(true);
    });

    it('is flagged without its key, which the sweep finds it by', () => {
      const report = sut([stale({ hasKey: false, nextReconcileAt: NOW + 1_000 })], []);

      expect(report.violations.stale_pending_unscheduled.examples).toEqual([
        { payment_id: 'p', reason: 'no idempotency key', age_ms: STALE + 60_000 },
      ]);
    });

    it('is not judged before the stale threshold, even without its key', () => {
      expect(sut([stale({ hasKey: false, createdAt: NOW - STALE + 1 })], []).ok).toBe(true);
    });

    it('may hold a charge already: in flight is not a violation', () => {
      const p = stale({ nextReconcileAt: NOW + 1_000 });
      expect(sut([p], [chargeOf(p, { id: 'ch_p' })]).ok).toBe(true);
    });
  });

  describe('refunds', () => {
    function refund(id: string, of: LedgerPayment, overrides: Partial<LedgerRefund> = {}): LedgerRefund {
      return {
        id,
        clientId: of.clientId,
        paymentId: of.id,
        amount: 100,
        status: 'succeeded',
        providerKey: `rk_${id}`,
        providerChargeId: of.providerChargeId ?? `ch_${of.id}`,
        providerRefundId: `rf_${id}`,
        createdAt: NOW - 1_000,
        nextReconcileAt: NOW - 1_000,
        hasKey: true,
        leasedUntil: null,
        ...overrides,
      };
    }

    /** The provider's refund of a refund, in agreement with it unless overridden. */
    function madeFor(r: LedgerRefund, overrides: Partial<ProviderRefund> = {}): ProviderRefund {
      return {
        id: r.providerRefundId ?? `rf_${r.id}`,
        object: 'refund',
        charge: r.providerChargeId,
        amount: r.amount,
        currency: 'USD',
        status: r.status === 'failed' ? 'failed' : r.status === 'succeeded' ? 'succeeded' : 'pending',
        failure_code: r.status === 'failed' ? 'refund_declined' : null,
        reference: r.id,
        idempotency_key: r.providerKey,
        created_at: new Date(r.createdAt).toISOString(),
        ...overrides,
      };
    }

    /** A paid payment (500) with these refunds, its sums as the refunds make them. */
    function refunded(p: LedgerPayment, refunds: LedgerRefund[]): LedgerPayment {
      const notFailed = refunds.filter((r) => r.status !== 'failed').reduce((sum, r) => sum + r.amount, 0);
      const succeeded = refunds.filter((r) => r.status === 'succeeded').reduce((sum, r) => sum + r.amount, 0);
      return { ...p, amountReserved: notFailed, amountRefunded: succeeded };
    }

    function audit(p: LedgerPayment, refunds: LedgerRefund[], providerRefunds: ProviderRefund[], overrides: Partial<LedgerInput> = {}) {
      const paid = refunded(p, refunds);
      return sut([paid], [chargeOf(paid)], { refunds, providerRefunds, ...overrides });
    }

    it('passes refunds of every status that the provider and the payment’s sums agree with, and counts them', () => {
      const p = payment('a');
      const done = refund('re_1', p);
      const refused = refund('re_2', p, { status: 'failed', amount: 300 });
      const inFlight = refund('re_3', p, { status: 'pending', providerRefundId: null, createdAt: NOW - 10 });
      const never = refund('re_4', p, { status: 'failed', providerRefundId: null });
      const report = audit(p, [done, refused, inFlight, never], [madeFor(done), madeFor(refused), madeFor(inFlight)]);

      expect(flagged(report)).toEqual({});
      expect(report.refunds).toEqual({ total: 4, pending: 1, succeeded: 1, failed: 2, requires_review: 0 });
      expect(report.provider_refunds).toEqual({ total: 3, pending: 1, succeeded: 1, failed: 1 });
    });

    it('flags two provider refunds for one refund, found by its reference', () => {
      const p = payment('a');
      const r = refund('re_1', p);
      const stray = madeFor(r, { id: 'rf_other', idempotency_key: 'rk_someone_else' });
      const report = audit(p, [r], [madeFor(r), stray]);

      expect(flagged(report)).toEqual({ double_refund: 1, refund_mismatch: 1 });
      expect(report.violations.double_refund.examples).toEqual([{ refund_id: 're_1', provider_refunds: 'rf_re_1,rf_other' }]);
    });

    it('flags two provider refunds under one provider key', () => {
      const p = payment('a');
      const r = refund('re_1', p);
      const report = audit(p, [r], [madeFor(r), madeFor(r, { id: 'rf_again' })]);

      expect(report.violations.double_refund.examples).toContainEqual({ idempotency_key: 'rk_re_1', provider_refunds: 'rf_re_1,rf_again' });
    });

    it('flags a provider refund that belongs to no refund, unless it was made after the refunds were read', () => {
      const p = payment('a');
      const ghost = madeFor(refund('re_ghost', p));
      const report = audit(p, [], [ghost]);

      expect(flagged(report)).toEqual({ orphan_refund: 1 });
      expect(report.violations.orphan_refund.examples).toEqual([
        { provider_refund_id: 'rf_re_ghost', idempotency_key: 'rk_re_ghost', reference: 're_ghost', charge: 'ch_a', amount: 100, status: 'succeeded' },
      ]);
      expect(flagged(audit(p, [], [ghost], { providerRefundsReadBeforeRefunds: new Set() }))).toEqual({});
    });

    it('flags a payment whose refunds not failed sum above its amount, and a charge refunded above its amount', () => {
      const p = payment('a');
      const refunds = [refund('re_1', p, { amount: 300 }), refund('re_2', p, { amount: 250, status: 'pending', providerRefundId: null })];
      const failed = refund('re_3', p, { amount: 500, status: 'failed' });
      const report = audit(p, [...refunds, failed], [...refunds, failed].map((r) => madeFor(r)));

      expect(flagged(report)).toEqual({ over_refund: 2 });
      expect(report.violations.over_refund.examples).toEqual([
        { charge_id: 'ch_a', amount: 500, refunds_not_failed: 550, provider_refunds: 3 },
        { payment_id: 'a', amount: 500, refunds_not_failed: 550, refunds: 3 },
      ]);
    });

    it.each([
      ['amount', { amount: 90 }, 'amount 90 (refund 100)'],
      ['charge', { charge: 'ch_b' }, 'charge ch_b (refund ch_a)'],
      ['reference', { reference: 're_zzz' }, 'reference re_zzz'],
    ])('flags a provider refund whose %s disagrees with its refund', (_field, overrides, problem) => {
      const p = payment('a');
      const r = refund('re_1', p);
      const report = audit(p, [r], [madeFor(r, overrides)]);

      expect(report.violations.refund_mismatch.examples).toEqual([{ refund_id: 're_1', provider_refund_id: 'rf_re_1', problem }]);
    });

    it('flags a succeeded refund that names another provider refund than the one the provider holds', () => {
      const p = payment('a');
      const r = refund('re_1', p, { providerRefundId: 'rf_forged' });
      const report = audit(p, [r], [madeFor(r, { id: 'rf_real' })]);

      expect(flagged(report)).toEqual({ refund_mismatch: 1 });
      expect(report.violations.refund_mismatch.examples[0]).toMatchObject({ problem: 'provider_refund_id is rf_forged' });
    });

    it.each([
      ['succeeded', 'absent', undefined],
      ['succeeded', 'failed', 'failed'],
      ['succeeded', 'pending', 'pending'],
      ['failed', 'succeeded', 'succeeded'],
      ['failed', 'pending', 'pending'],
    ] as const)('flags a refund %s here and %s at the provider', (status, providerStatus, made) => {
      const p = payment('a');
      const r = refund('re_1', p, { status });
      const report = audit(p, [r], made ? [madeFor(r, { status: made })] : []);

      expect(flagged(report)).toEqual({ refund_status_mismatch: 1 });
      expect(report.violations.refund_status_mismatch.examples).toEqual([{ refund_id: 're_1', status, provider_status: providerStatus }]);
    });

    it('flags a payment whose amount_reserved or amount_refunded is not the sum of its refunds', () => {
      const p = payment('a');
      const r = refund('re_1', p, { amount: 200 });
      const paid = refunded(p, [r]);
      const report = sut([{ ...paid, amountRefunded: 0 }], [chargeOf(paid)], { refunds: [r], providerRefunds: [madeFor(r)] });

      expect(flagged(report)).toEqual({ refund_sums_mismatch: 1 });
      expect(report.violations.refund_sums_mismatch.examples).toEqual([
        { payment_id: 'a', amount_reserved: 200, refunds_not_failed: 200, amount_refunded: 0, refunds_succeeded: 200 },
      ]);
    });

    it('flags a stale pending refund nothing will pick up, and a refund in review behind its final provider refund', () => {
      const p = payment('a');
      const overdue = { createdAt: NOW - STALE - 60_000, nextReconcileAt: NOW - SWEEP - GRACE - 1, providerRefundId: null };
      const stale = refund('re_1', p, { status: 'pending', ...overdue });
      const review = refund('re_2', p, { status: 'requires_review', ...overdue });
      const report = audit(p, [stale, review], [madeFor(review, { id: 'rf_2', status: 'succeeded' })]);

      expect(flagged(report)).toEqual({ stale_pending_unscheduled: 1, review_behind_provider: 1 });
      expect(report.violations.stale_pending_unscheduled.examples).toEqual([
        { refund_id: 're_1', reason: 'overdue and not queued', overdue_ms: SWEEP + GRACE + 1 },
      ]);
      expect(report.violations.review_behind_provider.examples[0]).toMatchObject({ refund_id: 're_2', provider_refund_id: 'rf_2' });
      expect(flagged(audit(p, [stale, review], [], { queuedReconciliations: new Set(['re_1', 're_2']) }))).toEqual({});
    });

    it('flags an acknowledged refund event the API has no record of', () => {
      const p = payment('a');
      const r = refund('re_1', p);
      const report = audit(p, [r], [madeFor(r)], { acknowledgedEvents: [{ id: 'evt_1', providerKey: r.providerKey }] });

      expect(flagged(report)).toEqual({ acknowledged_event_unrecorded: 1 });
    });
  });
});
