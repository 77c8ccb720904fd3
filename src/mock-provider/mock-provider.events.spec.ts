import { Webhook } from 'standardwebhooks';
import { chargeAt, chargeEvent, objectOf, refundAt, refundEvent, settlesAt, signedDelivery, versionAt } from './mock-provider.events';
import type { ChargeRecord, RefundRecord } from './mock-provider.types';

const SETTLE_MS = 1_000;
const CREATED = '2026-01-01T00:00:00.000Z';
const SECRET = 'whsec_3fulLzZy+ihVtzUO9c06pgtiuqco2ZNO';

const record = (status: ChargeRecord['status'], overrides: Partial<ChargeRecord> = {}): ChargeRecord => ({
  id: 'ch_1',
  status,
  amount: 1000,
  currency: 'EUR',
  failure_code: status === 'failed' ? 'card_declined' : null,
  reference: 'pay_1',
  idempotency_key: 'key_1',
  created_at: CREATED,
  payment_method: 'pm_card_x',
  ...overrides,
});

describe('charge versions', () => {
  it('gives a final charge version 1 forever, and no settle time', () => {
    for (const status of ['succeeded', 'failed'] as const) {
      expect(settlesAt(record(status), SETTLE_MS)).toBeUndefined();
      expect(versionAt(record(status), Date.parse(CREATED) + 10 * SETTLE_MS, SETTLE_MS)).toBe(1);
    }
  });

  it('moves a pending charge to version 2 exactly at its settle time', () => {
    const settles = Date.parse(CREATED) + SETTLE_MS;

    expect(settlesAt(record('pending'), SETTLE_MS)).toBe(settles);
    expect(versionAt(record('pending'), settles - 1, SETTLE_MS)).toBe(1);
    expect(versionAt(record('pending'), settles, SETTLE_MS)).toBe(2);
  });

  it('answers a pending charge as pending at version 1 and succeeded at version 2, without the payment method', () => {
    const pending = chargeAt(record('pending'), 1);

    expect(pending).toEqual({
      id: 'ch_1',
      status: 'pending',
      amount: 1000,
      currency: 'EUR',
      failure_code: null,
      reference: 'pay_1',
      idempotency_key: 'key_1',
      created_at: CREATED,
    });
    expect(chargeAt(record('pending'), 2)).toEqual({ ...pending, status: 'succeeded' });
  });
});

describe(chargeEvent.name, () => {
  it.each([
    ['succeeded', 1, 'charge.succeeded'],
    ['failed', 1, 'charge.failed'],
    ['pending', 1, 'charge.pending'],
    ['pending', 2, 'charge.succeeded'],
  ] as const)('a %s charge at version %d is a %s event', (status, version, type) => {
    const at = new Date('2026-01-01T00:00:05.000Z');

    const event = chargeEvent(record(status), version, 'evt_1', at);

    expect(event).toEqual({
      id: 'evt_1',
      type,
      created_at: at.toISOString(),
      data: { ...chargeAt(record(status), version), provider_key: 'key_1', version },
    });
  });
});

const refund = (status: RefundRecord['status']): RefundRecord => ({
  id: 'rf_1',
  object: 'refund',
  charge: 'ch_1',
  amount: 400,
  currency: 'EUR',
  status,
  failure_code: status === 'failed' ? 'refund_declined' : null,
  reference: 're_1',
  idempotency_key: 'refund_key_1',
  created_at: CREATED,
});

describe(refundEvent.name, () => {
  it('settles a pending refund like a pending charge, at the same time', () => {
    const settles = Date.parse(CREATED) + SETTLE_MS;

    expect(settlesAt(refund('pending'), SETTLE_MS)).toBe(settles);
    expect(settlesAt(refund('failed'), SETTLE_MS)).toBeUndefined();
    expect(refundAt(refund('pending'), 1)).toEqual(refund('pending'));
    expect(refundAt(refund('pending'), 2)).toEqual(refund('succeeded'));
  });

  it.each([
    ['succeeded', 1, 'refund.succeeded'],
    ['failed', 1, 'refund.failed'],
    ['pending', 1, 'refund.pending'],
    ['pending', 2, 'refund.succeeded'],
  ] as const)('a %s refund at version %d is a %s event, filed under the refund key', (status, version, type) => {
    const at = new Date('2026-01-01T00:00:05.000Z');

    const event = refundEvent(refund(status), version, 'evt_1', at);

    expect(event).toEqual({
      id: 'evt_1',
      type,
      created_at: at.toISOString(),
      data: { ...refundAt(refund(status), version), provider_key: 'refund_key_1', version },
    });
    expect(objectOf(event)).toBe('refund');
    expect(objectOf(chargeEvent(record(status), version, 'evt_2', at))).toBe('charge');
  });
});

describe(signedDelivery.name, () => {
  const event = chargeEvent(record('succeeded'), 1, 'evt_1', new Date(CREATED));

  it('signs the body, the event id and the attempt time with the shared secret', () => {
    const at = new Date();

    const { headers, body } = signedDelivery(new Webhook(SECRET), event, at);

    expect(headers).toEqual({
      'content-type': 'application/json',
      'webhook-id': 'evt_1',
      'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
      'webhook-signature': expect.stringMatching(/^v1,/),
    });
    expect(JSON.parse(body)).toEqual(event);
    expect(new Webhook(SECRET).verify(body, headers)).toEqual(event);
  });

  it('does not verify under another secret, or with the body changed', () => {
    const { headers, body } = signedDelivery(new Webhook(SECRET), event, new Date());
    const other = `whsec_${Buffer.alloc(24, 7).toString('base64')}`;

    expect(() => new Webhook(other).verify(body, headers)).toThrow();
    expect(() => new Webhook(SECRET).verify(body.replace('1000', '1001'), headers)).toThrow();
  });
});
