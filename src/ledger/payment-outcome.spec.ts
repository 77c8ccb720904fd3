import type { ProviderCharge } from '../provider/provider.client';
import type { Payment } from './payments.table';
import { aPayment } from './payment.fixture';
import { finalResponseFor, outcomeOfCharge } from './payment-outcome';

const charge = (overrides: Partial<ProviderCharge>): ProviderCharge => ({
  id: 'ch_1',
  status: 'succeeded',
  amount: 500,
  currency: 'USD',
  failure_code: null,
  ...overrides,
});

/** A succeeded payment, as it stands once its outcome is recorded. */
const payment = (overrides: Partial<Payment>): Payment =>
  aPayment({
    clientId: 'client',
    status: 'succeeded',
    providerChargeId: 'ch_1',
    updatedAt: new Date('2026-11-29T09:00:01Z'),
    ...overrides,
  });

const ordered = { amount: 500, currency: 'USD' };

describe('outcomeOfCharge', () => {
  it('maps a succeeded charge to a succeeded payment', () => {
    expect(outcomeOfCharge(charge({}), ordered)).toEqual({ status: 'succeeded', providerId: 'ch_1' });
  });

  it('maps a declined charge to a failed payment with the provider’s code', () => {
    expect(outcomeOfCharge(charge({ status: 'failed', failure_code: 'card_declined' }), ordered)).toEqual({
      status: 'failed',
      providerId: 'ch_1',
      failureCode: 'card_declined',
      failureMessage: 'The card was declined.',
    });
    expect(outcomeOfCharge(charge({ status: 'failed', failure_code: 'payment_method_unknown' }), ordered)).toMatchObject({
      failureCode: 'payment_method_unknown',
    });
  });

  it.each([
    ['amount', { amount: 501 }],
    ['currency', { currency: 'EUR' }],
  ])('sends a charge for another %s to review, whatever its status', (_field, overrides) => {
    expect(outcomeOfCharge(charge({ ...overrides, status: 'succeeded' }), ordered)).toMatchObject({
      status: 'requires_review',
      failureCode: 'provider_charge_mismatch',
    });
  });

  it('treats a pending charge as no outcome yet', () => {
    expect(outcomeOfCharge(charge({ status: 'pending' }), ordered)).toBeUndefined();
  });
});

describe('finalResponseFor', () => {
  it('answers 201 with the payment object for a success', () => {
    const response = finalResponseFor(payment({}));

    expect(response.status).toBe(201);
    const body = JSON.parse(response.body) as Record<string, unknown>;
    expect(body).toEqual({
      id: 'pay_1',
      object: 'payment',
      amount: 500,
      currency: 'USD',
      status: 'succeeded',
      payment_method: 'pm_card_ok',
      order_id: null,
      description: null,
      metadata: {},
      provider_charge_id: 'ch_1',
      failure_code: null,
      failure_message: null,
      amount_refunded: 0,
      created_at: '2026-11-29T09:00:00.000Z',
      updated_at: '2026-11-29T09:00:01.000Z',
    });
    // The docs' field order: what is refunded comes after the failure, before the times.
    expect(Object.keys(body).slice(-4)).toEqual(['failure_message', 'amount_refunded', 'created_at', 'updated_at']);
  });

  it('answers 402 card_declined with the failed payment embedded', () => {
    const failed = payment({ status: 'failed', failureCode: 'card_declined', failureMessage: 'The card was declined.' });
    const response = finalResponseFor(failed);

    expect(response.status).toBe(402);
    expect(JSON.parse(response.body)).toEqual({
      error: {
        type: 'card_error',
        code: 'card_declined',
        message: 'The card was declined.',
        payment: expect.objectContaining({ id: 'pay_1', status: 'failed', failure_code: 'card_declined' }),
      },
    });
  });

  it.each(['pending', 'requires_review'] as const)('refuses to build a final response for a %s payment', (status) => {
    expect(() => finalResponseFor(payment({ status }))).toThrow(`is ${status}: it has no final response`);
  });
});
