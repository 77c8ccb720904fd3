import { parseProviderRefund } from './provider-refund';

const refund = { id: 'rf_1', status: 'succeeded', amount: 400, charge: 'ch_1', failure_code: null };
/** As POST /refunds and GET /refunds/:providerKey answer it, with the fields a refund does not keep. */
const answered = {
  ...refund,
  object: 'refund',
  currency: 'EUR',
  reference: 're_1',
  idempotency_key: 'rk_1',
  created_at: '2026-01-01T00:00:00.000Z',
};

describe('parseProviderRefund', () => {
  it('accepts a well-formed refund and copies only the known fields', () => {
    expect(parseProviderRefund(answered)).toEqual(refund);
    expect(parseProviderRefund({ ...answered, provider_key: 'rk_1', version: 2, extra: true })).toEqual(refund);
    expect(parseProviderRefund({ ...refund, status: 'failed', failure_code: 'refund_declined' })).toEqual({
      ...refund,
      status: 'failed',
      failure_code: 'refund_declined',
    });
    expect(parseProviderRefund({ ...refund, status: 'pending' })).toEqual({ ...refund, status: 'pending' });
  });

  it.each([
    ['null', null],
    ['an array', [refund]],
    ['a string', 'rf_1'],
    ['no id', { ...refund, id: undefined }],
    ['an empty id', { ...refund, id: '' }],
    ['a numeric id', { ...refund, id: 1 }],
    ['no status', { ...refund, status: undefined }],
    ['an unknown status', { ...refund, status: 'refunded' }],
    ['an upper-case status', { ...refund, status: 'SUCCEEDED' }],
    ['no amount', { ...refund, amount: undefined }],
    ['a string amount', { ...refund, amount: '400' }],
    ['a fractional amount', { ...refund, amount: 4.5 }],
    ['a zero amount', { ...refund, amount: 0 }],
    ['a negative amount', { ...refund, amount: -1 }],
    ['an amount past a safe integer', { ...refund, amount: 2 ** 53 }],
    ['an infinite amount', { ...refund, amount: Infinity }],
    ['no charge', { ...refund, charge: undefined }],
    ['an empty charge', { ...refund, charge: '' }],
    ['a charge object in place of its id', { ...refund, charge: { id: 'ch_1' } }],
    ['U+0000 in the charge', { ...refund, charge: 'ch_\u0000' }],
    ['a lone surrogate in the charge', { ...refund, charge: 'ch_\ud800' }],
    ['a charge of 256 code points', { ...refund, charge: '\u{1f600}'.repeat(256) }],
    ['a missing failure_code', { ...refund, failure_code: undefined }],
    ['a numeric failure_code', { ...refund, failure_code: 7 }],
    ['U+0000 in the failure_code', { ...refund, status: 'failed', failure_code: 'refund_declined\u0000' }],
    ['a lone surrogate in the failure_code', { ...refund, status: 'failed', failure_code: 'declined\ud800' }],
    ['an empty failure_code', { ...refund, status: 'failed', failure_code: '' }],
    ['a failure_code of 101 code points', { ...refund, status: 'failed', failure_code: 'x'.repeat(101) }],
    ['U+0000 in the id', { ...refund, id: 'rf_\u0000' }],
    ['a lone surrogate in the id', { ...refund, id: '\udc00' }],
    ['an id of 256 code points', { ...refund, id: '\u{1f600}'.repeat(256) }],
  ])('rejects %s', (_label, body) => {
    expect(parseProviderRefund(body)).toBeUndefined();
  });

  it('counts the limits in code points, as the schema does', () => {
    const id = '\u{1f600}'.repeat(255);
    const charge = '\u{1d49c}'.repeat(255);
    const failureCode = '\u2764\ufe0f'.repeat(50);
    expect(parseProviderRefund({ ...refund, id, charge, status: 'failed', failure_code: failureCode })).toEqual({
      ...refund,
      id,
      charge,
      status: 'failed',
      failure_code: failureCode,
    });
  });
});
