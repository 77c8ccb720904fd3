/**
 * Retry-After (RFC 9110 section 10.2.3): either delta-seconds ("120") or an
 * HTTP-date ("Sun, 06 Nov 1994 08:49:37 GMT"), turned into milliseconds to wait.
 *
 * Only the IMF-fixdate form of HTTP-date is accepted: it is the one form senders
 * must generate. The obsolete RFC 850 and asctime forms, like any other value we
 * cannot read with certainty, give undefined, and the caller falls back to its
 * own backoff. The raw header never reaches Date.parse, which accepts far more
 * than HTTP-date and reads zone-less strings as local time.
 */

const DELTA_SECONDS = /^\d+$/;
const IMF_FIXDATE =
  /^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), (\d{2}) (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) (\d{4}) (\d{2}):(\d{2}):(\d{2}) GMT$/;
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

/**
 * Milliseconds to wait, or undefined when the value is missing or unreadable.
 * A date in the past means 0 (retry now). `nowMs` is the wall clock (epoch ms).
 */
export function parseRetryAfterMs(
  value: string | null | undefined,
  nowMs: number = Date.now(),
): number | undefined {
  const text = value?.trim();
  if (!text) return undefined;
  if (DELTA_SECONDS.test(text)) return Number(text) * 1000;

  const match = IMF_FIXDATE.exec(text);
  if (!match) return undefined;
  const [, day, monthName, year, hour, minute, second] = match;
  const month = String(MONTHS.indexOf(monthName) + 1).padStart(2, '0');
  const iso = `${year}-${month}-${day}T${hour}:${minute}:${second}.000Z`;
  const at = new Date(iso);
  // An impossible date (31 Feb, 24:00:00, a leap second) is invalid or rolls over
  // to another instant; either way it does not read back as what was sent.
  if (Number.isNaN(at.getTime()) || at.toISOString() !== iso) return undefined;
  return Math.max(0, at.getTime() - nowMs);
}
