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
    ['U+0000 in the failure_code', { ...charge, status: 'failed', failure_code: 'do_not_honor\u0000' }],
    ['a lone surrogate in the failure_code', { ...charge, status: 'failed', failure_code: 'declined\ud800' }],
    ['an empty failure_code', { ...charge, status: 'failed', failure_code: '' }],
    ['a failure_code of 101 code points', { ...charge, status: 'failed', failure_code: 'x'.repeat(101) }],
    ['U+0000 in the id', { ...charge, id: 'ch_\u0000' }],
    ['a lone surrogate in the id', { ...charge, id: '\udc00' }],
    ['an id of 256 code points', { ...charge, id: '\u{1f600}'.repeat(256) }],
  ])('rejects %s', (_label, body) => {
    expect(parseProviderCharge(body)).toBeUndefined();
  });

  it('counts the limits in code points, as the schema does', () => {
    const id = '\u{1f600}'.repeat(255);
    const failureCode = '\u2764\ufe0f'.repeat(50);
    expect(parseProviderCharge({ ...charge, id, status: 'failed', failure_code: failureCode })).toEqual({
      ...charge,
      id,
      status: 'failed',
      failure_code: failureCode,
    });
  });
});
