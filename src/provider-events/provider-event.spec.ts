import { DomainError } from '../common/domain-error';
import { isChargeEvent, parseProviderEvent } from './provider-event';

const charge = { id: 'ch_1', status: 'succeeded', amount: 500, currency: 'USD', failure_code: null };
const event = (overrides: Record<string, unknown> = {}, data: Record<string, unknown> = {}) => ({
  id: 'evt_1',
  type: 'charge.succeeded',
  created_at: '2026-12-01T00:00:00Z',
  data: { ...charge, provider_key: 'pk_pay_1', reference: 'pay_1', version: 2, ...data },
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

  it.each(['refund.pending', 'refund.succeeded', 'refund.failed'])(
    'reads a %s event as one this API acknowledges without applying it',
    (type) => {
      const refund = event({ type }, { id: 'rf_1', object: 'refund', charge: 'ch_1', provider_key: 'rk_1' });

      const parsed = parseProviderEvent(refund);

      expect(parsed).toEqual({ id: 'evt_1', type });
      expect(isChargeEvent(parsed)).toBe(false);
      expect(isChargeEvent(parseProviderEvent(event()))).toBe(true);
    },
  );

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
    ['an unknown refund type', event({ type: 'refund.refunded' })],
    ['a refund type and no id', event({ type: 'refund.succeeded', id: undefined })],
    ['a refund type and an id longer than 255', event({ type: 'refund.succeeded', id: 'e'.repeat(256) })],
  ])('refuses an event with %s', (_case, body) => {
    expect(() => parseProviderEvent(body)).toThrow(DomainError);
  });
});
