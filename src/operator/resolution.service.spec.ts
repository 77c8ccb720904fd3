import { strictMock } from '../common/strict-mock.fixture';
import { ledgerMocks, recordsOutcomes } from '../ledger/ledger.fixture';
import { PAYMENTS, REFUNDS } from '../ledger/operations';
import { aPayment } from '../ledger/payment.fixture';
import type { RefundsRepository } from '../ledger/refunds.repository';
import { aRefund } from '../ledger/refund.fixture';
import { type ResolveCommand, ResolutionService } from './resolution.service';

const charge = { id: 'ch_1', status: 'succeeded' as const, amount: 500, currency: 'USD', failure_code: null };

function setup() {
  const { dataSource, keys, rows, payments, provider, config, ledger } = ledgerMocks();
  const refunds = strictMock<RefundsRepository>('refunds');
  const sut = new ResolutionService(dataSource, keys, payments, refunds, ledger, provider, config);
  payments.findById = jest.fn().mockResolvedValue(aPayment({ status: 'requires_review' }));
  refunds.findById = jest.fn().mockResolvedValue(aRefund({ status: 'requires_review' }));
  keys.takeOverLeaseFor = jest.fn(async (_db, _operation, row, token, _ms) => ({ clientId: row.clientId, key: 'k', token }));
  /** The refusal path: the lease goes back, nothing is written. */
  const releases = () => {
    keys.release = jest.fn().mockResolvedValue(undefined);
  };
  /** The resolution path: one fenced statement that decides the row and stores the final response. */
  const records = () => {
    rows.recordOutcomeUnderLease = recordsOutcomes();
  };
  return { sut, keys, rows, payments, refunds, provider, releases, records };
}

const command = (status: 'succeeded' | 'failed'): ResolveCommand => ({
  operation: 'payment',
  id: 'pay_1',
  status,
  reason: 'why',
  by: 'ops',
});

describe('ResolutionService', () => {
  it.each([
    ['succeeded', { kind: 'found', charge }, 'succeeded'],
    ['failed', { kind: 'found', charge: { ...charge, status: 'failed', failure_code: 'card_declined' } }, 'failed'],
    ['failed', { kind: 'not_found' }, 'failed'],
  ] as const)('resolves %s when the provider agrees (%j)', async (status, lookup, expected) => {
    const { sut, keys, rows, provider, records } = setup();
    provider.getCharge = jest.fn().mockResolvedValue(lookup);
    records();

    const result = await sut.resolve(command(status));

    expect(result).toMatchObject({ resolved: true, payment: { status: expected } });
    // Looked up by the payment's provider key (PAYMENT_SIDE.lookup), under the payment's lease.
    expect(provider.getCharge).toHaveBeenCalledWith('pk_pay_1', expect.objectContaining({ clientId: 'client_1' }));
    expect(keys.takeOverLeaseFor).toHaveBeenCalledWith(
      expect.anything(),
      PAYMENTS,
      expect.objectContaining({ clientId: 'client_1', id: 'pay_1' }),
      expect.any(String),
      expect.any(Number),
    );
    expect(rows.recordOutcomeUnderLease).toHaveBeenCalledWith(
      expect.anything(),
      PAYMENTS,
      expect.objectContaining({ clientId: 'client_1', key: 'k' }),
      expect.objectContaining({ clientId: 'client_1', id: 'pay_1' }),
      expect.objectContaining({
        outcome: expect.objectContaining({ status: expected, resolution: { by: 'ops', reason: 'why' } }),
        answer: expect.objectContaining({ status: expected === 'succeeded' ? 201 : 402 }),
      }),
    );
  });

  it.each([
    ['failed', { kind: 'found', charge }, 'provider_contradicts'],
    ['succeeded', { kind: 'found', charge: { ...charge, status: 'failed' } }, 'provider_contradicts'],
    ['succeeded', { kind: 'not_found' }, 'provider_never_charged'],
    ['failed', { kind: 'found', charge: { ...charge, status: 'pending' } }, 'provider_pending'],
    ['succeeded', { kind: 'found', charge: { ...charge, amount: 1 } }, 'provider_charge_mismatch'],
    ['failed', { kind: 'unknown', gaveUp: 'deadline', reason: 'timeout', attempts: 3 }, 'provider_unreachable'],
  ] as const)('refuses %s when the provider says %j, releasing the lease and writing nothing', async (status, lookup, refusal) => {
    const { sut, keys, provider, releases } = setup();
    provider.getCharge = jest.fn().mockResolvedValue(lookup);
    releases();

    expect(await sut.resolve(command(status))).toMatchObject({ resolved: false, refusal, payment: { id: 'pay_1' } });
    expect(keys.release).toHaveBeenCalledTimes(1);
    // rows.recordOutcomeUnderLease is not stubbed: nothing was written.
  });

  it.each([
    ['missing', undefined, 'payment_not_found'],
    ['final', aPayment({ status: 'succeeded' }), 'not_in_review'],
    ['pending', aPayment({ status: 'pending' }), 'not_in_review'],
  ] as const)('refuses a %s payment without asking the provider', async (_name, payment, refusal) => {
    const { sut, keys, payments } = setup();
    payments.findById = jest.fn().mockResolvedValue(payment);

    expect(await sut.resolve(command('failed'))).toMatchObject({ resolved: false, refusal });
    expect(keys.takeOverLeaseFor).not.toHaveBeenCalled();
    // provider.getCharge is not stubbed.
  });

  it('refuses while someone holds the payment’s lease, without asking the provider', async () => {
    const { sut, keys } = setup();
    keys.takeOverLeaseFor = jest.fn().mockResolvedValue(undefined);

    expect(await sut.resolve(command('failed'))).toMatchObject({ resolved: false, refusal: 'payment_busy' });
  });

  describe('a refund in review (refund:resolve)', () => {
    const refundCommand = (status: 'succeeded' | 'failed'): ResolveCommand => ({
      operation: 'refund',
      id: 're_1',
      status,
      reason: 'why',
      by: 'ops',
    });
    const providerRefund = { id: 'rf_1', status: 'succeeded', amount: 200, charge: 'ch_1', failure_code: null } as const;

    it('resolves it as the provider’s refund says, through the same fenced statement, under the refund’s name', async () => {
      const { sut, keys, rows, refunds, provider, records } = setup();
      provider.getRefund = jest.fn().mockResolvedValue({ kind: 'found', refund: providerRefund });
      records();

      const result = await sut.resolve(refundCommand('succeeded'));

      expect(result).toMatchObject({ resolved: true, refund: { id: 're_1', status: 'succeeded', provider_refund_id: 'rf_1' } });
      expect(result).not.toHaveProperty('payment');
      expect(refunds.findById).toHaveBeenCalledWith(expect.anything(), 're_1');
      expect(provider.getRefund).toHaveBeenCalledWith('rk_re_1', expect.objectContaining({ clientId: 'client_1' }));
      expect(keys.takeOverLeaseFor).toHaveBeenCalledWith(
        expect.anything(),
        REFUNDS,
        expect.objectContaining({ id: 're_1' }),
        expect.any(String),
        expect.any(Number),
      );
      expect(rows.recordOutcomeUnderLease).toHaveBeenCalledWith(
        expect.anything(),
        REFUNDS,
        expect.objectContaining({ key: 'k' }),
        expect.objectContaining({ id: 're_1' }),
        expect.objectContaining({
          outcome: { status: 'succeeded', providerId: 'rf_1', resolution: { by: 'ops', reason: 'why' } },
          answer: expect.objectContaining({ status: 201 }),
        }),
      );
      // provider.getCharge is not stubbed: the payment's charge is not what a refund's resolution asks about.
    });

    it.each([
      ['succeeded', { kind: 'not_found' }, 'provider_never_refunded'],
      ['succeeded', { kind: 'found', refund: { ...providerRefund, amount: 1 } }, 'provider_refund_mismatch'],
      ['failed', { kind: 'found', refund: providerRefund }, 'provider_contradicts'],
    ] as const)('refuses %s when the provider says %j, in the refund’s words', async (status, lookup, refusal) => {
      const { sut, keys, provider, releases } = setup();
      provider.getRefund = jest.fn().mockResolvedValue(lookup);
      releases();

      expect(await sut.resolve(refundCommand(status))).toMatchObject({ resolved: false, refusal, refund: { id: 're_1' } });
      expect(keys.release).toHaveBeenCalledTimes(1);
    });

    it('refuses a missing refund as refund_not_found', async () => {
      const { sut, refunds } = setup();
      refunds.findById = jest.fn().mockResolvedValue(undefined);

      expect(await sut.resolve(refundCommand('failed'))).toMatchObject({ resolved: false, refusal: 'refund_not_found' });
    });
  });
});
