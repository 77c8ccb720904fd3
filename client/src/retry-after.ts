/**
 * Retry-After (RFC 9110 section 10.2.3): delta-seconds ("120") or an HTTP-date
 * in its IMF-fixdate form ("Sun, 06 Nov 1994 08:49:37 GMT"), as milliseconds
 * to wait. Anything else, the obsolete date forms included, is unreadable and
 * gives undefined: the backoff alone then decides. The raw header never
 * reaches Date.parse, which reads far more than HTTP-date and takes a
 * zone-less string as local time.
 */

const DELTA_SECONDS = /^\d+$/;
const IMF_FIXDATE =
  /^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), (\d{2}) (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) (\d{4}) (\d{2}):(\d{2}):(\d{2}) GMT$/;
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

/** Milliseconds to wait, or undefined when missing or unreadable; a date in the past is 0. `nowMs` is the wall clock. */
export function parseRetryAfterMs(value: string | null | undefined, nowMs: number = Date.now()): number | undefined {
  const text = value?.trim();
  if (!text) return undefined;
  if (DELTA_SECONDS.test(text)) return Number(text) * 1000;

  const match = IMF_FIXDATE.exec(text);
  if (!match) return undefined;
  const [, day, monthName, year, hour, minute, second] = match;
  const month = String(MONTHS.indexOf(monthName) + 1).padStart(2, '0');
  const iso = `${year}-${month}-${day}T${hour}:${minute}:${second}.000Z`;
  const at = new Date(iso);
  // 31 Feb, 24:00:00 or a leap second is invalid or rolls over: it does not read back as sent.
  if (Number.isNaN(at.getTime()) || at.toISOString() !== iso) return undefined;
  return Math.max(0, at.getTime() - nowMs);
}
