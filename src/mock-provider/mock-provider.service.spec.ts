import { loadConfig } from '../config/app-config';
import type { EventDelivery } from './mock-provider.delivery';
import { ChargeEventEmitter } from './mock-provider.emitter';
import { MockProviderError, MockProviderErrorCode } from './mock-provider.errors';
import { MockProviderService } from './mock-provider.service';
import { MockProviderStore } from './mock-provider.store';
import type { ChargeParams } from './mock-provider.types';

const SLOW_REPLY_MS = 300;
const SETTLE_MS = 1_000;

function setup() {
  const store = MockProviderStore.open();
  const config = loadConfig({
    PROVIDER_SLOW_REPLY_MS: String(SLOW_REPLY_MS),
    PROVIDER_PENDING_SETTLE_MS: String(SETTLE_MS),
  });
  const delivery = { deliver: jest.fn() } as unknown as EventDelivery;
  const events = new ChargeEventEmitter(store, delivery, config);
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
});
