import { loadConfig } from '../config/app-config';
import type { EventDelivery } from './mock-provider.delivery';
import { ProviderEventEmitter } from './mock-provider.emitter';
import { MockProviderError, MockProviderErrorCode } from './mock-provider.errors';
import { MockProviderService } from './mock-provider.service';
import { MockProviderStore } from './mock-provider.store';
import type { ChargeParams, RefundParams } from './mock-provider.types';

const SLOW_REPLY_MS = 300;
const SETTLE_MS = 1_000;

function setup() {
  const store = MockProviderStore.open();
  const config = loadConfig({
    PROVIDER_SLOW_REPLY_MS: String(SLOW_REPLY_MS),
    PROVIDER_PENDING_SETTLE_MS: String(SETTLE_MS),
  });
  const delivery = { deliver: jest.fn() } as unknown as EventDelivery;
  const events = new ProviderEventEmitter(store, delivery, config);
  return { sut: new MockProviderService(store, config, events), store, events };
}

const params = (paymentMethod: string, overrides: Partial<ChargeParams> = {}): ChargeParams => ({
  amount: 1000,
  currency: 'EUR',
  payment_method: paymentMethod,
  reference: 'pay_1',
  ...overrides,
});

function refusal(call: () => unknown): MockProviderError {
  try {
    call();
  } catch (error) {
    if (error instanceof MockProviderError) return error;
    throw error;
  }
  throw new Error('expected the call to be refused');
}

describe(MockProviderService.name, () => {
  afterEach(() => {
    jest.useRealTimers();
  });

  describe('test tokens', () => {
    it('pm_card_ok records a success and replies at once', () => {
      const { sut, store } = setup();

      const outcome = sut.createCharge('key_1', params('pm_card_ok'));

      expect(outcome).toEqual({
        reply: 'now',
        charge: {
          id: expect.stringMatching(/^ch_[0-9A-Z]{26}$/),
          status: 'succeeded',
          amount: 1000,
          currency: 'EUR',
          failure_code: null,
          reference: 'pay_1',
          idempotency_key: 'key_1',
          created_at: expect.any(String),
        },
      });
      expect(store.all()).toHaveLength(1);
      expect(outcome.charge).not.toHaveProperty('payment_method');
    });

    it('pm_card_declined records a failure with card_declined', () => {
      const { sut, store } = setup();

      const { charge } = sut.createCharge('key_1', params('pm_card_declined'));

      expect(charge).toMatchObject({ status: 'failed', failure_code: 'card_declined' });
      expect(store.find('key_1')).toMatchObject({ status: 'failed' });
    });

    it('pm_card_lost_response records a success but never replies, the first time only', () => {
      const { sut, store } = setup();

      const first = sut.createCharge('key_1', params('pm_card_lost_response'));
      const second = sut.createCharge('key_1', params('pm_card_lost_response'));

      expect(first.reply).toBe('never');
      expect(store.find('key_1')).toMatchObject({ status: 'succeeded' });
      expect(second).toEqual({ reply: 'now', charge: first.charge });
    });

    it('pm_card_timeout records a success and replies late, the first time only', () => {
      const { sut, store } = setup();

      const first = sut.createCharge('key_1', params('pm_card_timeout'));
      const second = sut.createCharge('key_1', params('pm_card_timeout'));

      expect(first).toEqual({ reply: 'after', delayMs: SLOW_REPLY_MS, charge: expect.any(Object) });
      expect(store.find('key_1')).toMatchObject({ status: 'succeeded' });
      expect(second).toEqual({ reply: 'now', charge: first.charge });
    });

    it('pm_card_flaky is unavailable twice without recording, then succeeds', () => {
      const { sut, store } = setup();

      for (let call = 1; call <= 2; call++) {
        expect(refusal(() => sut.createCharge('key_1', params('pm_card_flaky'))).code).toBe(
          MockProviderErrorCode.ServiceUnavailable,
        );
        expect(store.all()).toEqual([]);
      }
      const third = sut.createCharge('key_1', params('pm_card_flaky'));

      expect(third.charge.status).toBe('succeeded');
      expect(sut.createCharge('key_1', params('pm_card_flaky')).charge).toEqual(third.charge);
    });

    it('pm_card_flaky counts calls per key', () => {
      const { sut } = setup();
      refusal(() => sut.createCharge('key_1', params('pm_card_flaky')));
      refusal(() => sut.createCharge('key_1', params('pm_card_flaky')));

      expect(refusal(() => sut.createCharge('key_2', params('pm_card_flaky'))).code).toBe(
        MockProviderErrorCode.ServiceUnavailable,
      );
    });

    it('pm_card_rate_limited refuses the first call with Retry-After 1, then succeeds', () => {
      const { sut, store } = setup();

      const error = refusal(() => sut.createCharge('key_1', params('pm_card_rate_limited')));

      expect(error.code).toBe(MockProviderErrorCode.RateLimited);
      expect(error.retryAfterSeconds).toBe(1);
      expect(store.all()).toEqual([]);
      const retry = sut.createCharge('key_1', params('pm_card_rate_limited'));
      expect(retry.charge.status).toBe('succeeded');
    });

    it('pm_card_unavailable is always unavailable and records nothing', () => {
      const { sut, store } = setup();

      for (let call = 1; call <= 5; call++) {
        expect(refusal(() => sut.createCharge('key_1', params('pm_card_unavailable'))).code).toBe(
          MockProviderErrorCode.ServiceUnavailable,
        );
      }
      expect(store.all()).toEqual([]);
    });

    it('pm_card_pending reads as succeeded once settled, without rewriting the record', () => {
      jest.useFakeTimers({ now: new Date('2026-01-01T00:00:00.000Z') });
      const { sut, store } = setup();

      const { charge } = sut.createCharge('key_1', params('pm_card_pending'));
      jest.setSystemTime(Date.now() + SETTLE_MS - 1);
      const before = sut.getCharge('key_1');
      jest.setSystemTime(Date.now() + 1);

      expect(charge.status).toBe('pending');
      expect(before.status).toBe('pending');
      expect(sut.getCharge('key_1')).toEqual({ ...charge, status: 'succeeded' });
      expect(sut.listCharges()).toEqual([{ ...charge, status: 'succeeded' }]);
      expect(sut.createCharge('key_1', params('pm_card_pending')).charge.status).toBe('succeeded');
      expect(store.find('key_1')?.status).toBe('pending');
    });

    it('records the event of a new charge before answering', () => {
      const { sut, events } = setup();

      const { charge } = sut.createCharge('key_1', params('pm_card_declined'));

      expect(events.listEvents()).toEqual([
        {
          id: expect.stringMatching(/^evt_/),
          type: 'charge.failed',
          created_at: expect.any(String),
          data: { ...charge, provider_key: 'key_1', version: 1 },
          delivered: false,
          attempts: 0,
        },
      ]);
    });

    it('records any other payment method as a definitive payment_method_unknown failure', () => {
      const { sut, store } = setup();

      const { charge } = sut.createCharge('key_1', params('pm_card_visa'));

      expect(charge).toMatchObject({ status: 'failed', failure_code: 'payment_method_unknown' });
      expect(store.all()).toHaveLength(1);
    });
  });

  describe('idempotency', () => {
    it('replays the same charge for the same key and parameters', () => {
      const { sut, store } = setup();
      const first = sut.createCharge('key_1', params('pm_card_ok'));

      const replay = sut.createCharge('key_1', params('pm_card_ok'));

      expect(replay).toEqual(first);
      expect(store.all()).toHaveLength(1);
      expect(store.listEvents()).toHaveLength(1);
    });

    it.each<[string, Partial<ChargeParams>]>([
      ['amount', { amount: 1001 }],
      ['currency', { currency: 'USD' }],
      ['payment_method', { payment_method: 'pm_card_declined' }],
      ['reference', { reference: 'pay_2' }],
    ])('refuses the key reused with another %s, and keeps the first charge', (_field, change) => {
      const { sut, store } = setup();
      const first = sut.createCharge('key_1', params('pm_card_ok'));

      const error = refusal(() => sut.createCharge('key_1', params('pm_card_ok', change)));

      expect(error.code).toBe(MockProviderErrorCode.IdempotencyKeyReused);
      expect(sut.listCharges()).toEqual([first.charge]);
      expect(store.all()).toHaveLength(1);
    });

    it('records one charge when many calls with one key interleave', async () => {
      const { sut, store } = setup();

      const outcomes = await Promise.all(
        Array.from({ length: 50 }, async () => {
          await Promise.resolve();
          return sut.createCharge('key_1', params('pm_card_ok'));
        }),
      );

      expect(store.all()).toHaveLength(1);
      const ids = new Set(outcomes.map((outcome) => outcome.charge.id));
      expect(ids).toEqual(new Set([store.all()[0]!.id]));
    });

    it('counts each interleaved call once for the tokens that refuse first calls', async () => {
      const { sut, store } = setup();

      const results = await Promise.allSettled(
        Array.from({ length: 50 }, async () => {
          await Promise.resolve();
          return sut.createCharge('key_1', params('pm_card_flaky'));
        }),
      );

      expect(results.filter((result) => result.status === 'rejected')).toHaveLength(2);
      expect(store.all()).toHaveLength(1);
    });
  });

  describe('reading charges', () => {
    it('answers charge_not_found for a key never received', () => {
      const { sut } = setup();
      sut.createCharge('key_1', params('pm_card_ok'));

      expect(refusal(() => sut.getCharge('key_2')).code).toBe(MockProviderErrorCode.ChargeNotFound);
    });

    it('lists every charge held', () => {
      const { sut } = setup();
      const a = sut.createCharge('key_a', params('pm_card_ok')).charge;
      const b = sut.createCharge('key_b', params('pm_card_declined')).charge;

      expect(sut.listCharges()).toEqual([a, b]);
    });
  });

  describe('refunds', () => {
    /** A charge made with `paymentMethod` (1000 EUR), and a refund of it by key. */
    function charged(paymentMethod: string, key = 'key_1') {
      const context = setup();
      const { charge } = context.sut.createCharge(key, params(paymentMethod));
      const refundParams = (overrides: Partial<RefundParams> = {}): RefundParams => ({
        charge: charge.id,
        amount: 400,
        reference: 're_1',
        ...overrides,
      });
      const refund = (refundKey: string, overrides: Partial<RefundParams> = {}) =>
        context.sut.createRefund(refundKey, refundParams(overrides));
      return { ...context, charge, refundParams, refund };
    }

    it('refunds a succeeded charge at once, and answers it as the refund object', () => {
      const { sut, charge, refund } = charged('pm_card_ok');

      const outcome = refund('rk_1');

      expect(outcome).toEqual({
        reply: 'now',
        refund: {
          id: expect.stringMatching(/^rf_[0-9A-Z]{26}$/),
          object: 'refund',
          charge: charge.id,
          amount: 400,
          currency: 'EUR',
          status: 'succeeded',
          failure_code: null,
          reference: 're_1',
          idempotency_key: 'rk_1',
          created_at: expect.any(String),
        },
      });
      expect(sut.getRefund('rk_1')).toEqual(outcome.refund);
      expect(sut.listRefunds()).toEqual([outcome.refund]);
    });

    it('pm_card_refund_fails: the charge succeeds, its refunds fail with refund_declined', () => {
      const { charge, refund } = charged('pm_card_refund_fails');

      expect(charge.status).toBe('succeeded');
      expect(refund('rk_1').refund).toMatchObject({ status: 'failed', failure_code: 'refund_declined' });
    });

    it('pm_card_refund_lost_response records the refund but never replies, the first time only', () => {
      const { sut, refund } = charged('pm_card_refund_lost_response');

      const first = refund('rk_1');
      const second = refund('rk_1');

      expect(first.reply).toBe('never');
      expect(sut.getRefund('rk_1').status).toBe('succeeded');
      expect(second).toEqual({ reply: 'now', refund: first.refund });
    });

    it('pm_card_refund_timeout records the refund and replies late, the first time only', () => {
      const { refund } = charged('pm_card_refund_timeout');

      const first = refund('rk_1');
      const second = refund('rk_1');

      expect(first).toEqual({ reply: 'after', delayMs: SLOW_REPLY_MS, refund: expect.any(Object) });
      expect(first.refund.status).toBe('succeeded');
      expect(second).toEqual({ reply: 'now', refund: first.refund });
    });

    it('pm_card_refund_pending: the refund reads as succeeded once settled, without rewriting the record', () => {
      jest.useFakeTimers({ now: new Date('2026-01-01T00:00:00.000Z') });
      const { sut, store, refund } = charged('pm_card_refund_pending');

      const { refund: created } = refund('rk_1');
      jest.setSystemTime(Date.now() + SETTLE_MS - 1);
      const before = sut.getRefund('rk_1');
      jest.setSystemTime(Date.now() + 1);

      expect(created.status).toBe('pending');
      expect(before.status).toBe('pending');
      expect(sut.getRefund('rk_1')).toEqual({ ...created, status: 'succeeded' });
      expect(sut.listRefunds()).toEqual([{ ...created, status: 'succeeded' }]);
      expect(refund('rk_1').refund.status).toBe('succeeded');
      expect(store.findRefund('rk_1')?.status).toBe('pending');
    });

    it('refunds the other succeeding cards at once, a pm_card_pending charge once it has settled', () => {
      jest.useFakeTimers({ now: new Date('2026-01-01T00:00:00.000Z') });
      for (const method of ['pm_card_lost_response', 'pm_card_timeout', 'pm_card_pending']) {
        const { refund } = charged(method);
        jest.setSystemTime(Date.now() + SETTLE_MS);

        expect(refund('rk_1')).toMatchObject({ reply: 'now', refund: { status: 'succeeded' } });
      }
    });

    it.each(['pm_card_declined', 'pm_card_visa', 'pm_card_pending'])(
      'refuses to refund a %s charge that has not succeeded, with charge_not_refundable, recording nothing',
      (method) => {
        const { sut, store, refund } = charged(method);

        expect(refusal(() => refund('rk_1')).code).toBe(MockProviderErrorCode.ChargeNotRefundable);
        expect(sut.listRefunds()).toEqual([]);
        expect(store.listEvents().filter((event) => event.type.startsWith('refund.'))).toEqual([]);
      },
    );

    it('answers charge_not_found for a charge id it never made', () => {
      const { refund } = charged('pm_card_ok');

      expect(refusal(() => refund('rk_1', { charge: 'ch_unknown' })).code).toBe(MockProviderErrorCode.ChargeNotFound);
    });

    it('never lets the refunds of a charge that have not failed sum above it', () => {
      const { sut, refund } = charged('pm_card_ok');
      refund('rk_1', { amount: 600 });

      const error = refusal(() => refund('rk_2', { amount: 401 }));
      const rest = refund('rk_3', { amount: 400 });

      expect(error.code).toBe(MockProviderErrorCode.AmountTooLarge);
      expect(error.message).toContain('400 of 1000 is left');
      expect(rest.refund.status).toBe('succeeded');
      expect(refusal(() => refund('rk_4', { amount: 1 })).code).toBe(MockProviderErrorCode.AmountTooLarge);
      expect(sut.listRefunds().map((each) => each.idempotency_key)).toEqual(['rk_1', 'rk_3']);
    });

    it('counts a pending refund against the charge, and gives a failed one back', () => {
      const pending = charged('pm_card_refund_pending');
      pending.refund('rk_1', { amount: 1000 });
      const failing = charged('pm_card_refund_fails');
      failing.refund('rk_1', { amount: 1000 });

      expect(refusal(() => pending.refund('rk_2', { amount: 1 })).code).toBe(MockProviderErrorCode.AmountTooLarge);
      expect(failing.refund('rk_2', { amount: 1000 }).refund.status).toBe('failed');
    });

    it('replays a refund for its key even once the charge is fully refunded', () => {
      const { store, refund } = charged('pm_card_ok');
      const first = refund('rk_1', { amount: 1000 });

      expect(refund('rk_1', { amount: 1000 })).toEqual(first);
      expect(store.allRefunds()).toHaveLength(1);
      expect(store.listEvents().filter((event) => event.type.startsWith('refund.'))).toHaveLength(1);
    });

    it.each<[string, Partial<RefundParams>]>([
      ['charge', { charge: 'ch_other' }],
      ['amount', { amount: 401 }],
      ['reference', { reference: 're_2' }],
    ])('refuses the key reused with another %s, and keeps the first refund', (_field, change) => {
      const { sut, refund } = charged('pm_card_ok');
      const first = refund('rk_1');

      expect(refusal(() => refund('rk_1', change)).code).toBe(MockProviderErrorCode.IdempotencyKeyReused);
      expect(sut.listRefunds()).toEqual([first.refund]);
    });

    it('records one refund when many calls with one key interleave, and never exceeds the charge', async () => {
      const { store, refund } = charged('pm_card_ok');

      const results = await Promise.allSettled(
        Array.from({ length: 50 }, async (_, index) => {
          await Promise.resolve();
          return index % 2 === 0 ? refund('rk_same', { amount: 300 }) : refund(`rk_${index}`, { amount: 300 });
        }),
      );

      const refunded = store.allRefunds().reduce((sum, each) => sum + each.amount, 0);
      expect(refunded).toBe(900);
      expect(store.allRefunds().filter((each) => each.idempotency_key === 'rk_same')).toHaveLength(1);
      expect(results.filter((result) => result.status === 'fulfilled').length).toBeGreaterThanOrEqual(25);
    });

    it('records the event of a new refund before answering, under the refund key, versioned apart from charges', () => {
      const { sut, events, charge } = charged('pm_card_refund_fails', 'same_key');

      const { refund } = sut.createRefund('same_key', { charge: charge.id, amount: 1, reference: 're_1' });

      expect(events.listEvents()).toEqual([
        expect.objectContaining({ type: 'charge.succeeded', data: expect.objectContaining({ version: 1 }) }),
        {
          id: expect.stringMatching(/^evt_/),
          type: 'refund.failed',
          created_at: expect.any(String),
          data: { ...refund, provider_key: 'same_key', version: 1 },
          delivered: false,
          attempts: 0,
        },
      ]);
    });

    it('answers refund_not_found for a key never received', () => {
      const { sut, refund } = charged('pm_card_ok');
      refund('rk_1');

      expect(refusal(() => sut.getRefund('rk_2')).code).toBe(MockProviderErrorCode.RefundNotFound);
    });
  });
});
