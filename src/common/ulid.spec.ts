import { randomFillSync } from 'node:crypto';
import { decodeTime } from 'ulid';
import { firstUlidAt, newUlid, ulidTime } from './ulid';

// The real generator, watched: how often the kernel is asked, and for how much.
jest.mock('node:crypto', () => {
  const actual = jest.requireActual<typeof import('node:crypto')>('node:crypto');
  return { ...actual, randomFillSync: jest.fn(actual.randomFillSync) };
});
const fills = jest.mocked(randomFillSync);

const ULID = /^[0-9A-HJKMNP-TV-Z]{26}$/;

describe('newUlid', () => {
  it('is a ULID of the current time', () => {
    const before = Date.now();
    const id = newUlid();
    const after = Date.now();

    expect(id).toMatch(ULID);
    expect(decodeTime(id)).toBeGreaterThanOrEqual(before);
    expect(decodeTime(id)).toBeLessThanOrEqual(after);
  });

  it('draws its randomness from the kernel 4 KB at a time, not per id', () => {
    fills.mockClear();

    for (let i = 0; i < 512; i++) newUlid();

    // 512 ids take 8 KB: two refills, or three when the pool was part-used already.
    expect(fills.mock.calls.length).toBeGreaterThanOrEqual(2);
    expect(fills.mock.calls.length).toBeLessThanOrEqual(3);
    for (const [buffer] of fills.mock.calls) expect((buffer as Uint8Array).byteLength).toBe(4096);
  });

  it('never repeats, across refills of the pool', () => {
    const ids = Array.from({ length: 2000 }, () => newUlid());

    expect(new Set(ids).size).toBe(ids.length);
    expect(new Set(ids.map((id) => id.slice(10))).size).toBe(ids.length);
  });

  it('spreads the random characters over the whole alphabet', () => {
    const counts = new Map<string, number>();
    for (let i = 0; i < 2000; i++) for (const c of newUlid().slice(10)) counts.set(c, (counts.get(c) ?? 0) + 1);

    // 32,000 characters over 32 symbols: 1,000 each expected; a bias to or away from one would show far outside 800 to 1,200.
    expect(counts.size).toBe(32);
    for (const n of counts.values()) {
      expect(n).toBeGreaterThan(800);
      expect(n).toBeLessThan(1200);
    }
  });
});

describe('firstUlidAt', () => {
  it('sorts after every ULID made earlier and before or at every one made from that millisecond on', () => {
    const now = Date.now();
    const first = firstUlidAt(now);

    expect(first).toMatch(ULID);
    expect(ulidTime(first)).toBe(now);
    expect(firstUlidAt(now - 1) < first).toBe(true);
    const made = newUlid();
    expect(firstUlidAt(ulidTime(made) + 1) > made).toBe(true);
    expect(firstUlidAt(ulidTime(made)) <= made).toBe(true);
  });

  it('reads no time from a ULID-shaped string past the largest time', () => {
    expect(ulidTime('Z'.repeat(26))).toBeNaN();
  });
});
