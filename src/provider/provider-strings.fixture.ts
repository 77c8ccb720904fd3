import fc from 'fast-check';

/**
 * The strings and values a provider body may carry, for the property specs of
 * parseProviderCharge and parseProviderRefund: both hold the provider's
 * strings to one contract (storable, within a cap in code points), so both are
 * tried against the same strings. The checks are written here again rather
 * than taken from src/common/unicode.ts, so the specs do not rest on the code
 * they test.
 *
 * A fixture, like payment.fixture.ts: tsconfig.build.json leaves it out of the
 * build.
 */

/** In a `u` regular expression a surrogate pair is one code point, so \p{Cs} matches only a lone surrogate. */
export const storable = (text: string) => !text.includes('\u0000') && !/\p{Cs}/u.test(text);
export const codePoints = (text: string) => [...text].length;

const loneSurrogate = fc.integer({ min: 0xd800, max: 0xdfff }).map((unit) => String.fromCharCode(unit));

/** One unit of text: plain, astral (two UTF-16 units, one code point), with a variation selector, or one that cannot be stored. */
const piece = fc.oneof(
  { arbitrary: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 1 }), weight: 4 },
  { arbitrary: fc.constantFrom('a', '_', '😀', '𝒜', '❤️', 'e\u0301', '👩‍👩‍👧', '\ufe0f', '\u200d', '\ufeff', '\uffff'), weight: 4 },
  { arbitrary: fc.constantFrom('\u0000', '\ud800', '\udfff', '\udc00\ud800'), weight: 1 },
  { arbitrary: loneSurrogate, weight: 1 },
);

/** A string of `count` copies of one piece: lengths that sit on either side of the caps, in code points and in UTF-16 units. */
const repeated = fc
  .tuple(
    fc.constantFrom('x', '😀', '𝒜', '❤️', 'e\u0301', '👩‍👩‍👧'),
    fc.constantFrom(1, 33, 50, 51, 99, 100, 101, 127, 128, 254, 255, 256, 300),
  )
  .map(([unit, count]) => unit.repeat(count));

/** Strings of every kind a provider's id or failure_code may come as. */
export const anyString: fc.Arbitrary<string> = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.array(piece, { maxLength: 12 }).map((pieces) => pieces.join('')),
  repeated,
  // A storable string with one U+0000 or lone surrogate put anywhere in it.
  fc
    .tuple(repeated, fc.constantFrom('\u0000', '\ud800', '\udbff', '\udc00'), fc.nat())
    .map(([text, bad, at]) => `${text.slice(0, at % (text.length + 1))}${bad}${text.slice(at % (text.length + 1))}`),
  fc.constantFrom('', 'ch_1', 'rf_1', 'do_not_honor\u0000', 'ch_\ud800', 'card_declined', 'refund_declined', '\u0000'),
);

/** Values of any JSON type, and a few that JSON.parse never makes. */
export const anyValue: fc.Arbitrary<unknown> = fc.oneof(
  anyString,
  fc.jsonValue({ maxDepth: 2 }),
  fc.constantFrom(undefined, null, NaN, Infinity, -1, 1.5, 2 ** 53, -0, '500', true, [], {}),
);

/** A string the contract says must be read: storable and within its cap, however it is spelled. */
export const storableString = (min: number, max: number) =>
  fc
    .oneof(
      fc.array(piece, { minLength: 1, maxLength: 40 }).map((pieces) => pieces.join('')),
      repeated,
      fc.string({ unit: 'grapheme', minLength: min, maxLength: max }),
    )
    .filter((text) => storable(text) && codePoints(text) >= min && codePoints(text) <= max);

/** What makes a string unstorable, put between two code points by `poisoned`. */
export const poison = fc.constantFrom('\u0000', '\ud800', '\udfff', '\udc00\ud800');

/** `text` with `bad` put between two code points: inside a surrogate pair, '\udc00\ud800' would make two whole pairs. */
export function poisoned(text: string, bad: string, at: number): string {
  const points = [...text];
  const cut = at % (points.length + 1);
  return `${points.slice(0, cut).join('')}${bad}${points.slice(cut).join('')}`;
}
