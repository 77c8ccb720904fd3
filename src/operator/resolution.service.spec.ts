import { ledgerMocks, recordsOutcomes } from '../ledger/ledger.fixture';
import { aPayment } from '../ledger/payment.fixture';
import { type ResolveCommand, ResolutionService } from './resolution.service';

const charge = { id: 'ch_1', status: 'succeeded' as const, amount: 500, currency: 'USD', failure_code: null };

function setup() {
  const { dataSource, keys, payments, provider, config, ledger } = ledgerMocks();
  const sut = new ResolutionService(dataSource, keys, payments, ledger, provider, config);
  payments.findById = jest.fn().mockResolvedValue(aPayment({ status: 'requires_review' }));
  keys.takeOverLeaseForPayment = jest.fn(async (_db, payment, token, _ms) => ({ clientId: payment.clientId, key: 'k', token }));
  /** The refusal path: the lease goes back, nothing is written. */
  const releases = () => {
    keys.release = jest.fn().mockResolvedValue(undefined);
  };
  /** The resolution path: one fenced statement that decides the payment and stores the final response. */
  const records = () => {
    payments.recordOutcomeUnderLease = recordsOutcomes();
  };
  return { sut, keys, payments, provider, releases, records };
}

const command = (status: 'succeeded' | 'failed'): ResolveCommand => ({ paymentId: 'pay_1', status, reason: 'why', by: 'ops' });

describe('ResolutionService', () => {
  it.each([
    ['succeeded', { kind: 'found', charge }, 'succeeded'],
    ['failed', { kind: 'found', charge: { ...charge, status: 'failed', failure_code: 'card_declined' } }, 'failed'],
    ['failed', { kind: 'not_found' }, 'failed'],
  ] as const)('resolves %s when the provider agrees (%j)', async (status, lookup, expected) => {
    const { sut, payments, provider, records } = setup();
    provider.getCharge = jest.fn().mockResolvedValue(lookup);
    records();

    const result = await sut.resolve(command(status));

    expect(result).toMatchObject({ resolved: true, payment: { status: expected } });
    expect(payments.recordOutcomeUnderLease).toHaveBeenCalledWith(
      expect.anything(),
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

    expect(await sut.resolve(command(status))).toMatchObject({ resolved: false, refusal });
    expect(keys.release).toHaveBeenCalledTimes(1);
    // payments.recordOutcomeUnderLease is not stubbed: nothing was written.
  });

  it.each([
    ['missing', undefined, 'payment_not_found'],
    ['final', aPayment({ status: 'succeeded' }), 'not_in_review'],
    ['pending', aPayment({ status: 'pending' }), 'not_in_review'],
  ] as const)('refuses a %s payment without asking the provider', async (_name, payment, refusal) => {
    const { sut, payments } = setup();
    payments.findById = jest.fn().mockResolvedValue(payment);

    expect(await sut.resolve(command('failed'))).toMatchObject({ resolved: false, refusal });
    // provider.getCharge and keys.takeOverLeaseForPayment are not stubbed.
  });

  it('refuses while someone holds the payment’s lease, without asking the provider', async () => {
    const { sut, keys } = setup();
    keys.takeOverLeaseForPayment = jest.fn().mockResolvedValue(undefined);

    expect(await sut.resolve(command('failed'))).toMatchObject({ resolved: false, refusal: 'payment_busy' });
  });
});
