import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MockProviderStore } from './mock-provider.store';
import type { ChargeRecord } from './mock-provider.types';

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

    it('refuses to start from a corrupt journal, naming the line', () => {
      const journal = join(dir, 'charges.jsonl');
      writeFileSync(journal, `${JSON.stringify(record('a'))}\n{"torn":\n`);

      expect(() => MockProviderStore.open(journal)).toThrow(`${journal}:2`);
    });
  });
});
