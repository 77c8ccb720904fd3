import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chargeEvent, refundEvent } from './mock-provider.events';
import { MockProviderStore } from './mock-provider.store';
import type { ChargeRecord, RefundRecord } from './mock-provider.types';

const record = (key: string, overrides: Partial<ChargeRecord> = {}): ChargeRecord => ({
  id: `ch_${key}`,
  status: 'succeeded',
  amount: 1000,
  currency: 'EUR',
  failure_code: null,
  reference: `pay_${key}`,
  idempotency_key: key,
  created_at: '2026-01-01T00:00:00.000Z',
  payment_method: 'pm_card_ok',
  ...overrides,
});

const refund = (key: string, chargeKey: string, overrides: Partial<RefundRecord> = {}): RefundRecord => ({
  id: `rf_${key}`,
  object: 'refund',
  charge: `ch_${chargeKey}`,
  amount: 100,
  currency: 'EUR',
  status: 'succeeded',
  failure_code: null,
  reference: `re_${key}`,
  idempotency_key: key,
  created_at: '2026-01-01T00:00:00.000Z',
  ...overrides,
});

const EMITTED = new Date('2026-01-01T00:00:01.000Z');
const event = (key: string, version: number) =>
  chargeEvent(record(key, { status: 'pending' }), version, `evt_${key}_${version}`, EMITTED);

describe(MockProviderStore.name, () => {
  let dir: string;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'mock-provider-store-'));
  });

  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  describe('without a journal', () => {
    it('finds what it holds, in insertion order', () => {
      const sut = MockProviderStore.open();
      sut.insert(record('b'));
      sut.insert(record('a'));

      expect(sut.find('a')).toEqual(record('a'));
      expect(sut.find('c')).toBeUndefined();
      expect(sut.all().map((charge) => charge.idempotency_key)).toEqual(['b', 'a']);
    });

    it('refuses a second charge for one key and keeps the first', () => {
      const sut = MockProviderStore.open();
      sut.insert(record('a'));

      expect(() => sut.insert(record('a', { id: 'ch_other' }))).toThrow(/already recorded/);
      expect(sut.all()).toEqual([record('a')]);
    });
  });

  describe('refunds', () => {
    it('finds a charge by its id, and refunds by key and by charge, oldest first', () => {
      const sut = MockProviderStore.open();
      sut.insert(record('a'));
      sut.insert(record('b'));
      sut.insertRefund(refund('r2', 'a'));
      sut.insertRefund(refund('r1', 'b'));
      sut.insertRefund(refund('r3', 'a'));

      expect(sut.findChargeById('ch_a')).toEqual(record('a'));
      expect(sut.findChargeById('a')).toBeUndefined();
      expect(sut.findRefund('r1')).toEqual(refund('r1', 'b'));
      expect(sut.findRefund('a')).toBeUndefined();
      expect(sut.refundsOf('ch_a')).toEqual([refund('r2', 'a'), refund('r3', 'a')]);
      expect(sut.refundsOf('ch_c')).toEqual([]);
      expect(sut.allRefunds().map((each) => each.idempotency_key)).toEqual(['r2', 'r1', 'r3']);
    });

    it('refuses a second refund for one key and keeps the first', () => {
      const sut = MockProviderStore.open();
      sut.insertRefund(refund('r1', 'a'));

      expect(() => sut.insertRefund(refund('r1', 'a', { id: 'rf_other' }))).toThrow(/refund is already recorded/);
      expect(sut.allRefunds()).toEqual([refund('r1', 'a')]);
      expect(sut.refundsOf('ch_a')).toEqual([refund('r1', 'a')]);
    });

    it('keeps the versions of a refund apart from those of a charge with the same key', () => {
      const sut = MockProviderStore.open();
      sut.recordEvent(event('k', 1));
      sut.recordEvent(refundEvent(refund('k', 'a', { status: 'pending' }), 1, 'evt_refund_k_1', EMITTED));

      expect(sut.lastVersion('charge', 'k')).toBe(1);
      expect(sut.lastVersion('refund', 'k')).toBe(1);
      expect(() => sut.recordEvent(refundEvent(refund('k', 'a'), 1, 'evt_again', EMITTED))).toThrow(
        /refund key k follows version 1/,
      );
    });
  });

  describe('events', () => {
    it('keeps each charge\'s versions in order, and refuses a version twice or out of turn', () => {
      const sut = MockProviderStore.open();
      sut.recordEvent(event('a', 1));

      expect(() => sut.recordEvent(event('a', 1))).toThrow(/follows version 1/);
      expect(() => sut.recordEvent(event('a', 3))).toThrow(/follows version 1/);
      expect(() => sut.recordEvent(event('b', 2))).toThrow(/follows version 0/);
      sut.recordEvent(event('a', 2));
      expect(sut.lastVersion('charge', 'a')).toBe(2);
      expect(sut.lastVersion('charge', 'b')).toBe(0);
    });

    it('lists events oldest first with their delivery state; only the first acknowledgement counts', () => {
      const sut = MockProviderStore.open();
      sut.recordEvent(event('a', 1));
      sut.recordEvent(event('b', 1));
      sut.countAttempt('evt_a_1');
      sut.countAttempt('evt_a_1');
      sut.markDelivered('evt_a_1', new Date());
      sut.countAttempt('evt_a_1');
      sut.markDelivered('evt_a_1', new Date());
      sut.countAttempt('evt_b_1');

      expect(sut.listEvents()).toEqual([
        { ...event('a', 1), delivered: true, attempts: 2 },
        { ...event('b', 1), delivered: false, attempts: 1 },
      ]);
      expect(sut.undeliveredEvents()).toEqual([event('b', 1)]);
    });
  });

  describe('with a journal', () => {
    it('reloads every charge after a restart', () => {
      const journal = join(dir, 'charges.jsonl');
      const first = MockProviderStore.open(journal);
      first.insert(record('a'));
      first.insert(record('b', { status: 'pending' }));

      const reopened = MockProviderStore.open(journal);

      expect(reopened.all()).toEqual([record('a'), record('b', { status: 'pending' })]);
      expect(readFileSync(journal, 'utf8').trim().split('\n')).toHaveLength(2);
    });

    it('keeps appending after a reload', () => {
      const journal = join(dir, 'charges.jsonl');
      MockProviderStore.open(journal).insert(record('a'));
      MockProviderStore.open(journal).insert(record('b'));

      expect(MockProviderStore.open(journal).all()).toEqual([record('a'), record('b')]);
    });

    it('does not journal a refused duplicate', () => {
      const journal = join(dir, 'charges.jsonl');
      const sut = MockProviderStore.open(journal);
      sut.insert(record('a'));

      expect(() => sut.insert(record('a', { id: 'ch_other' }))).toThrow();
      expect(MockProviderStore.open(journal).all()).toEqual([record('a')]);
    });

    it('creates a missing journal at open, and fails at open on a path it cannot write', () => {
      const journal = join(dir, 'new.jsonl');

      expect(MockProviderStore.open(journal).all()).toEqual([]);
      expect(readFileSync(journal, 'utf8')).toBe('');
      const unwritable = join(dir, 'missing-dir', 'charges.jsonl');
      expect(() => MockProviderStore.open(unwritable)).toThrow(/ENOENT/);
    });

    it('reloads events and acknowledgements, not attempts that were never acknowledged', () => {
      const journal = join(dir, 'charges.jsonl');
      const first = MockProviderStore.open(journal);
      first.insert(record('a'));
      first.recordEvent(event('a', 1));
      first.recordEvent(event('a', 2));
      first.countAttempt('evt_a_1');
      first.markDelivered('evt_a_1', new Date());
      first.countAttempt('evt_a_2');

      const reopened = MockProviderStore.open(journal);

      expect(reopened.listEvents()).toEqual([
        { ...event('a', 1), delivered: true, attempts: 1 },
        { ...event('a', 2), delivered: false, attempts: 0 },
      ]);
      expect(reopened.lastVersion('charge', 'a')).toBe(2);
      expect(() => reopened.recordEvent(event('a', 2))).toThrow();
    });

    it('reloads refunds and their events after a restart', () => {
      const journal = join(dir, 'charges.jsonl');
      const first = MockProviderStore.open(journal);
      first.insert(record('a'));
      first.insertRefund(refund('r1', 'a', { status: 'pending' }));
      const refundCreated = refundEvent(refund('r1', 'a', { status: 'pending' }), 1, 'evt_r1_1', EMITTED);
      first.recordEvent(refundCreated);

      const reopened = MockProviderStore.open(journal);

      expect(reopened.allRefunds()).toEqual([refund('r1', 'a', { status: 'pending' })]);
      expect(reopened.refundsOf('ch_a')).toEqual(reopened.allRefunds());
      expect(reopened.findChargeById('ch_a')).toEqual(record('a'));
      expect(reopened.listEvents()).toEqual([{ ...refundCreated, delivered: false, attempts: 0 }]);
      expect(reopened.lastVersion('refund', 'r1')).toBe(1);
      expect(reopened.lastVersion('charge', 'r1')).toBe(0);
    });

    it('reads a journal of bare charge records, as written before events, and appends typed lines to it', () => {
      const journal = join(dir, 'charges.jsonl');
      writeFileSync(journal, `${JSON.stringify(record('a'))}\n`);

      const sut = MockProviderStore.open(journal);
      sut.insert(record('b'));
      sut.recordEvent(event('b', 1));

      expect(MockProviderStore.open(journal).all()).toEqual([record('a'), record('b')]);
      const kinds = readFileSync(journal, 'utf8')
        .trim()
        .split('\n')
        .map((line) => (JSON.parse(line) as { kind?: string }).kind);
      expect(kinds).toEqual([undefined, 'charge', 'event']);
    });

    it('refuses to start from a line of an unknown kind, naming the line', () => {
      const journal = join(dir, 'charges.jsonl');
      writeFileSync(journal, `${JSON.stringify(record('a'))}\n{"kind":"dispute"}\n`);

      expect(() => MockProviderStore.open(journal)).toThrow(`${journal}:2`);
    });

    it('refuses to start from a corrupt journal, naming the line', () => {
      const journal = join(dir, 'charges.jsonl');
      writeFileSync(journal, `${JSON.stringify(record('a'))}\n{"torn":\n`);

      expect(() => MockProviderStore.open(journal)).toThrow(`${journal}:2`);
    });
  });
});
