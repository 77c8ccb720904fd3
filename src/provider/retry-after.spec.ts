import { parseRetryAfterMs } from './retry-after';

const now = Date.UTC(2026, 10, 29, 12, 0, 0); // Sun, 29 Nov 2026 12:00:00 GMT

describe('parseRetryAfterMs', () => {
  it.each([
    ['0', 0],
    ['1', 1000],
    ['120', 120_000],
    [' 5 ', 5000],
  ])('reads delta-seconds %j as %i ms', (value, ms) => {
    expect(parseRetryAfterMs(value, now)).toBe(ms);
  });

  it('reads an IMF-fixdate relative to the given now', () => {
    expect(parseRetryAfterMs('Sun, 29 Nov 2026 12:00:05 GMT', now)).toBe(5000);
    expect(parseRetryAfterMs('Mon, 30 Nov 2026 12:00:00 GMT', now)).toBe(86_400_000);
  });

  it('reads a date in the past as 0, retry now', () => {
    expect(parseRetryAfterMs('Sun, 06 Nov 1994 08:49:37 GMT', now)).toBe(0);
  });

  it.each([
    [undefined],
    [null],
    [''],
    ['   '],
    ['soon'],
    ['-1'],
    ['1.5'],
    ['1e3'],
    ['0x10'],
    ['5 seconds'],
    ['Sun, 31 Feb 2026 12:00:00 GMT'], // no such day
    ['Sun, 29 Nov 2026 24:00:00 GMT'], // no such hour
    ['Sun, 29 Nov 2026 12:00:05 UTC'], // HTTP-date is always "GMT"
    ['Sun, 29 Nov 2026 12:00:05'], // no zone: Date.parse would read local time
    ['2026-11-29T12:00:05Z'], // ISO 8601 is not an HTTP-date
    ['Sunday, 29-Nov-26 12:00:05 GMT'], // obsolete RFC 850 form, not accepted
    ['Sun Nov 29 12:00:05 2026'], // obsolete asctime form, not accepted
  ])('reads %j as undefined', (value) => {
    expect(parseRetryAfterMs(value, now)).toBeUndefined();
  });
});
