import type { Payment } from './payments.table';

/** A payment row for unit specs: pending, 500 USD, with whatever the test overrides. */
export function aPayment(overrides: Partial<Payment> = {}): Payment {
  return {
    id: 'pay_1',
    clientId: 'client_1',
    amount: 500,
    currency: 'USD',
    paymentMethod: 'pm_card_ok',
    orderId: null,
    description: null,
    metadata: {},
    status: 'pending',
    providerKey: 'pk_pay_1',
    providerChargeId: null,
    failureCode: null,
    failureMessage: null,
    reconcileAttempts: 0,
    nextReconcileAt: new Date('2026-11-29T09:00:00Z'),
    resolvedBy: null,
    resolutionReason: null,
    providerVersion: 0,
    amountReserved: 0,
    amountRefunded: 0,
    traceParent: null,
    createdAt: new Date('2026-11-29T09:00:00Z'),
    updatedAt: new Date('2026-11-29T09:00:00Z'),
    ...overrides,
  };
}
