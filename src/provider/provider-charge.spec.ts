import { parseProviderCharge } from './provider-charge';

const charge = { id: 'ch_1', status: 'succeeded', amount: 500, currency: 'USD', failure_code: null };

describe('parseProviderCharge', () => {
  it('accepts a well-formed charge and copies only the known fields', () => {
    expect(parseProviderCharge({ ...charge, reference: 'pay_1', extra: true })).toEqual(charge);
    expect(parseProviderCharge({ ...charge, status: 'failed', failure_code: 'card_declined' })).toEqual({
      ...charge,
      status: 'failed',
      failure_code: 'card_declined',
    });
  });

  it.each([
    ['null', null],
    ['an array', [charge]],
    ['a string', 'ch_1'],
    ['no id', { ...charge, id: undefined }],
    ['an empty id', { ...charge, id: '' }],
    ['an unknown status', { ...charge, status: 'refunded' }],
    ['a string amount', { ...charge, amount: '500' }],
    ['a fractional amount', { ...charge, amount: 5.5 }],
    ['a negative amount', { ...charge, amount: -1 }],
    ['a lower-case currency', { ...charge, currency: 'usd' }],
    ['a missing failure_code', { ...charge, failure_code: undefined }],
    ['a numeric failure_code', { ...charge, failure_code: 7 }],
  ])('rejects %s', (_label, body) => {
    expect(parseProviderCharge(body)).toBeUndefined();
  });
});
