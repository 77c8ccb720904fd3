/**
 * Text as Postgres stores and counts it. A `text` value cannot hold U+0000,
 * and UTF-8 has no form for a lone surrogate (node-postgres would write
 * U+FFFD in its place, so what is stored would not be what was sent);
 * `length()` counts code points, where JavaScript's `.length` counts UTF-16
 * units and class-validator's Length subtracts variation selectors. Every
 * limit this service states is counted here, so a value the validation lets
 * through is one the schema's checks accept.
 */

/** In a `u` regular expression a surrogate pair is one code point, so \p{Cs} matches only a lone surrogate. */
const LONE_SURROGATE = /\p{Cs}/u;

/** Whether Postgres can store `text` as it is: no U+0000, no lone surrogate. */
export function storable(text: string): boolean {
  return !text.includes('\u0000') && !LONE_SURROGATE.test(text);
}

/** The length Postgres' length() gives: code points, a surrogate pair counting once. */
export function codePointLength(text: string): number {
  let surrogatePairs = 0;
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit >= 0xd800 && unit <= 0xdbff) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        surrogatePairs++;
        i++;
      }
    }
  }
  return text.length - surrogatePairs;
}

/** A storable string of `min` to `max` code points. */
export function storableWithin(text: string, min: number, max: number): boolean {
  if (text.length < min || text.length > 2 * max) return false;
  const length = codePointLength(text);
  return length >= min && length <= max && storable(text);
}
