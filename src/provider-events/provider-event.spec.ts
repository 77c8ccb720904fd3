import { DomainError } from '../common/domain-error';
import { parseProviderEvent } from './provider-event';

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
    expect(parseProviderEvent(event({}, { version: 2 ** 31 - 1 })).data.version).toBe(2 ** 31 - 1);
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
  ])('refuses an event with %s', (_case, body) => {
    expect(() => parseProviderEvent(body)).toThrow(DomainError);
  });
});
