import { parseRetryAfterMs } from '../src/retry-after.js';

const NOW = Date.parse('2026-03-01T12:00:00.000Z');

describe('parseRetryAfterMs', () => {
  it.each<[string | null | undefined, number | undefined]>([
    ['0', 0],
    ['1', 1_000],
    [' 120 ', 120_000],
    ['Sun, 01 Mar 2026 12:00:30 GMT', 30_000],
    // A date in the past: retry now.
    ['Sun, 01 Mar 2026 11:59:00 GMT', 0],
    // What cannot be read with certainty is ignored: the backoff decides.
    [undefined, undefined],
    [null, undefined],
    ['', undefined],
    ['-1', undefined],
    ['1.5', undefined],
    ['soon', undefined],
    ['Sunday, 01-Mar-26 12:00:30 GMT', undefined],
    ['Sun Mar  1 12:00:30 2026', undefined],
    ['Sun, 01 Mar 2026 12:00:30 +0000', undefined],
    ['2026-03-01T12:00:30Z', undefined],
    ['Mon, 31 Feb 2026 12:00:30 GMT', undefined],
    ['Sun, 01 Mar 2026 24:00:00 GMT', undefined],
  ])('%p is %p ms', (value, expected) => {
    expect(parseRetryAfterMs(value, NOW)).toBe(expected);
  });
});
