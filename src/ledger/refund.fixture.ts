import type { Refund } from './refunds.table';

/** A refund row for unit specs: pending, 200 USD of pay_1's charge ch_1, with whatever the test overrides. */
export function aRefund(overrides: Partial<Refund> = {}): Refund {
  return {
    id: 're_1',
    clientId: 'client_1',
    paymentId: 'pay_1',
    amount: 200,
    currency: 'USD',
    reason: null,
    metadata: {},
    status: 'pending',
    providerKey: 'rk_re_1',
    providerChargeId: 'ch_1',
    providerRefundId: null,
    failureCode: null,
    failureMessage: null,
    reconcileAttempts: 0,
    nextReconcileAt: new Date('2026-11-29T09:00:00Z'),
    resolvedBy: null,
    resolutionReason: null,
    providerVersion: 0,
    traceParent: null,
    createdAt: new Date('2026-11-29T09:00:00Z'),
    updatedAt: new Date('2026-11-29T09:00:00Z'),
    ...overrides,
  };
}
