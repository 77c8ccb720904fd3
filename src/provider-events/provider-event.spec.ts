import { DomainError } from '../common/domain-error';
import { isChargeEvent, isRefundEvent, parseProviderEvent } from './provider-event';

const charge = { id: 'ch_1', status: 'succeeded', amount: 500, currency: 'USD', failure_code: null };
const event = (overrides: Record<string, unknown> = {}, data: Record<string, unknown> = {}) => ({
  id: 'evt_1',
  type: 'charge.succeeded',
  created_at: '2026-12-01T00:00:00Z',
  data: { ...charge, provider_key: 'pk_pay_1', reference: 'pay_1', version: 2, ...data },
  ...overrides,
});

const refund = { id: 'rf_1', status: 'succeeded', amount: 400, charge: 'ch_1', failure_code: null };
/** A refund event as the mock provider sends it: the refund as GET /refunds/:providerKey answers it, its key and version. */
const refundEvent = (overrides: Record<string, unknown> = {}, data: Record<string, unknown> = {}) => ({
  id: 'evt_2',
  type: 'refund.succeeded',
  created_at: '2026-12-01T00:00:00Z',
  data: {
    ...refund,
    object: 'refund',
    currency: 'USD',
    reference: 're_1',
    idempotency_key: 'rk_re_1',
    created_at: '2026-12-01T00:00:00Z',
    provider_key: 'rk_re_1',
    version: 1,
    ...data,
  },
  ...overrides,
});

describe('parseProviderEvent', () => {
  it('reads the charge, its provider key and its version', () => {
    expect(parseProviderEvent(event())).toEqual({
      id: 'evt_1',
      type: 'charge.succeeded',
      data: { charge, providerKey: 'pk_pay_1', version: 2 },
    });
  });

  it('reads the largest version payments.provider_version holds', () => {
    expect(parseProviderEvent(event({}, { version: 2 ** 31 - 1 }))).toMatchObject({ data: { version: 2 ** 31 - 1 } });
  });

  it.each([
    ['refund.pending', { status: 'pending' }],
    ['refund.succeeded', { status: 'succeeded' }],
    ['refund.failed', { status: 'failed', failure_code: 'refund_declined' }],
  ])('reads a %s event: the refund, its own provider key and its version', (type, change) => {
    const parsed = parseProviderEvent(refundEvent({ type }, change));

    expect(parsed).toEqual({
      id: 'evt_2',
      type,
      data: { refund: { ...refund, ...change }, providerKey: 'rk_re_1', version: 1 },
    });
    expect(isRefundEvent(parsed)).toBe(true);
    expect(isChargeEvent(parsed)).toBe(false);
  });

  it('tells a charge event from a refund event', () => {
    const parsed = parseProviderEvent(event());
    expect(isChargeEvent(parsed)).toBe(true);
    expect(isRefundEvent(parsed)).toBe(false);
  });

  it('reads the largest version a refund event may carry', () => {
    expect(parseProviderEvent(refundEvent({}, { version: 2 ** 31 - 1 }))).toMatchObject({ data: { version: 2 ** 31 - 1 } });
  });

  it.each([
    ['no id', event({ id: undefined })],
    ['an unknown type', event({ type: 'charge.refunded' })],
    ['a type that disagrees with the charge', event({ type: 'charge.failed' })],
    ['no provider key', event({}, { provider_key: undefined })],
    ['a version below 1', event({}, { version: 0 })],
    ['a fractional version', event({}, { version: 1.5 })],
    ['a version past what payments.provider_version holds', event({}, { version: 2 ** 31 })],
    ['a version past a safe integer', event({}, { version: 2 ** 53 })],
    ['a malformed charge', event({}, { amount: '500' })],
    ['no data', event({ data: null })],
  ])('refuses a charge event with %s', (_case, body) => {
    expect(() => parseProviderEvent(body)).toThrow(DomainError);
  });

  it.each([
    ['an unknown refund type', refundEvent({ type: 'refund.refunded' })],
    ['no id', refundEvent({ id: undefined })],
    ['an id longer than 255', refundEvent({ id: 'e'.repeat(256) })],
    ['a type that disagrees with the refund', refundEvent({ type: 'refund.failed' })],
    ['a pending type for a settled refund', refundEvent({ type: 'refund.pending' })],
    ['no data', refundEvent({ data: null })],
    ['data that is an array', refundEvent({ data: [refundEvent().data] })],
    ['no provider key', refundEvent({}, { provider_key: undefined })],
    ['a numeric provider key', refundEvent({}, { provider_key: 7 })],
    ['no version', refundEvent({}, { version: undefined })],
    ['a version below 1', refundEvent({}, { version: 0 })],
    ['a fractional version', refundEvent({}, { version: 1.5 })],
    ['a version as a string', refundEvent({}, { version: '1' })],
    ['a version past 2^31 - 1', refundEvent({}, { version: 2 ** 31 })],
    ['an amount as a string', refundEvent({}, { amount: '400' })],
    ['a zero amount', refundEvent({}, { amount: 0 })],
    ['no charge id', refundEvent({}, { charge: undefined })],
    ['U+0000 in the charge id', refundEvent({}, { charge: 'ch_\u0000' })],
    ['a lone surrogate in the refund id', refundEvent({}, { id: 'rf_\ud800' })],
    ['a failure_code of 101 code points', refundEvent({ type: 'refund.failed' }, { status: 'failed', failure_code: 'x'.repeat(101) })],
    ['a refund type carrying a charge', event({ type: 'refund.succeeded' })],
  ])('refuses a refund event with %s', (_case, body) => {
    expect(() => parseProviderEvent(body)).toThrow(DomainError);
  });
});
