import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../config/app-config';
import type { EventDelivery } from './mock-provider.delivery';
import { ProviderEventEmitter } from './mock-provider.emitter';
import { MockProviderStore } from './mock-provider.store';
import type { ChargeRecord, RefundRecord } from './mock-provider.types';

const SETTLE_MS = 1_000;
const START = new Date('2026-01-01T00:00:00.000Z');

const record = (key: string, status: ChargeRecord['status']): ChargeRecord => ({
  id: `ch_${key}`,
  status,
  amount: 1000,
  currency: 'EUR',
  failure_code: null,
  reference: `pay_${key}`,
  idempotency_key: key,
  created_at: new Date().toISOString(),
  payment_method: 'pm_card_pending',
});

const refund = (key: string, status: RefundRecord['status']): RefundRecord => ({
  id: `rf_${key}`,
  object: 'refund',
  charge: 'ch_a',
  amount: 400,
  currency: 'EUR',
  status,
  failure_code: null,
  reference: `re_${key}`,
  idempotency_key: key,
  created_at: new Date().toISOString(),
});

function setup(store: MockProviderStore) {
  const deliver = jest.fn();
  const config = loadConfig({ PROVIDER_PENDING_SETTLE_MS: String(SETTLE_MS) });
  const sut = new ProviderEventEmitter(store, { deliver } as unknown as EventDelivery, config);
  const versions = (key: string, object: 'charge' | 'refund' = 'charge') =>
    sut
      .listEvents()
      .filter((event) => event.data.provider_key === key)
      .filter((event) => event.type.startsWith(object))
      .map((event) => [event.type, event.data.version]);
  const delivered = () => deliver.mock.calls.map(([event]: [{ id: string }]) => event.id);
  return { sut, store, deliver, versions, delivered };
}

describe(ProviderEventEmitter.name, () => {
  let dir: string;

  beforeEach(() => {
    jest.useFakeTimers({ now: START });
    dir = mkdtempSync(join(tmpdir(), 'mock-provider-emitter-'));
  });

  afterEach(() => {
    jest.useRealTimers();
    rmSync(dir, { recursive: true, force: true });
  });

  it('emits a final charge once, and hands it to delivery', () => {
    const store = MockProviderStore.open();
    const { sut, versions, delivered } = setup(store);
    const charge = record('a', 'failed');
    store.insert(charge);

    sut.chargeRecorded(charge);
    jest.advanceTimersByTime(10 * SETTLE_MS);

    expect(versions('a')).toEqual([['charge.failed', 1]]);
    expect(delivered()).toEqual(sut.listEvents().map((event) => event.id));
  });

  it('emits the settle of a pending charge by a timer, at its settle time and only once', () => {
    const store = MockProviderStore.open();
    const { sut, versions, deliver } = setup(store);
    const charge = record('a', 'pending');
    store.insert(charge);

    sut.chargeRecorded(charge);
    jest.advanceTimersByTime(SETTLE_MS - 1);
    const before = versions('a');
    jest.advanceTimersByTime(1);
    const atSettle = versions('a');
    jest.advanceTimersByTime(10 * SETTLE_MS);

    expect(before).toEqual([['charge.pending', 1]]);
    expect(atSettle).toEqual([
      ['charge.pending', 1],
      ['charge.succeeded', 2],
    ]);
    expect(versions('a')).toEqual(atSettle);
    expect(deliver).toHaveBeenCalledTimes(2);
  });

  it('after a restart, redelivers what was not acknowledged and settles a pending charge from the journal', () => {
    const journal = join(dir, 'journal.jsonl');
    const first = setup(MockProviderStore.open(journal));
    const charge = record('a', 'pending');
    const acknowledged = record('b', 'succeeded');
    for (const each of [charge, acknowledged]) {
      first.store.insert(each);
      first.sut.chargeRecorded(each);
    }
    const [pendingEvent, acknowledgedEvent] = first.sut.listEvents();
    first.store.markDelivered(acknowledgedEvent!.id, new Date());
    first.sut.onModuleDestroy();

    const second = setup(MockProviderStore.open(journal));
    second.sut.onApplicationBootstrap();
    const redelivered = second.delivered();
    jest.advanceTimersByTime(SETTLE_MS);

    expect(redelivered).toEqual([pendingEvent!.id]);
    expect(second.versions('a')).toEqual([
      ['charge.pending', 1],
      ['charge.succeeded', 2],
    ]);
    expect(second.versions('b')).toEqual([['charge.succeeded', 1]]);
  });

  it('emits on start, once, the changes it missed while down, and re-emits none', () => {
    const journal = join(dir, 'journal.jsonl');
    const store = MockProviderStore.open(journal);
    // Journaled without its event, as a crash between the two writes would leave it.
    store.insert(record('a', 'pending'));
    jest.advanceTimersByTime(SETTLE_MS);

    const first = setup(MockProviderStore.open(journal));
    first.sut.onApplicationBootstrap();
    const second = setup(MockProviderStore.open(journal));
    second.sut.onApplicationBootstrap();
    jest.advanceTimersByTime(10 * SETTLE_MS);

    expect(first.versions('a')).toEqual([
      ['charge.pending', 1],
      ['charge.succeeded', 2],
    ]);
    expect(second.sut.listEvents()).toEqual(first.sut.listEvents());
  });

  it('emits a refund and its settle like a charge, under the refund key, apart from a charge with that key', () => {
    const store = MockProviderStore.open();
    const { sut, versions, deliver } = setup(store);
    const charge = record('a', 'succeeded');
    const pending = refund('a', 'pending');
    store.insert(charge);
    sut.chargeRecorded(charge);
    store.insertRefund(pending);

    sut.refundRecorded(pending);
    jest.advanceTimersByTime(SETTLE_MS - 1);
    const before = versions('a', 'refund');
    jest.advanceTimersByTime(10 * SETTLE_MS);

    expect(before).toEqual([['refund.pending', 1]]);
    expect(versions('a', 'refund')).toEqual([
      ['refund.pending', 1],
      ['refund.succeeded', 2],
    ]);
    expect(versions('a')).toEqual([['charge.succeeded', 1]]);
    expect(deliver).toHaveBeenCalledTimes(3);
  });

  it('after a restart, settles a pending refund from the journal and emits what it missed, once', () => {
    const journal = join(dir, 'journal.jsonl');
    const store = MockProviderStore.open(journal);
    // Journaled without its event, as a crash between the two writes would leave it.
    store.insertRefund(refund('r', 'pending'));

    const first = setup(MockProviderStore.open(journal));
    first.sut.onApplicationBootstrap();
    const onStart = first.versions('r', 'refund');
    jest.advanceTimersByTime(SETTLE_MS);
    first.sut.onModuleDestroy();
    const second = setup(MockProviderStore.open(journal));
    second.sut.onApplicationBootstrap();

    expect(onStart).toEqual([['refund.pending', 1]]);
    expect(second.versions('r', 'refund')).toEqual([
      ['refund.pending', 1],
      ['refund.succeeded', 2],
    ]);
    expect(second.sut.listEvents()).toEqual(first.sut.listEvents());
  });
});
