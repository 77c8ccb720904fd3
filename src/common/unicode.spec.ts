import { codePointLength, storable, storableWithin } from './unicode';

describe('text as Postgres stores it', () => {
  it.each([
    ['plain ASCII', 'abc', 3],
    ['a variation selector counts as its own code point', '\u2764\ufe0f', 2],
    ['an astral character counts once', '\u{1d49c}', 1],
    ['a combining mark counts on its own', 'e\u0301', 2],
    ['a family emoji counts each person and joiner', '\u{1f469}\u200d\u{1f469}\u200d\u{1f467}', 5],
    ['a lone high surrogate counts once', '\ud800x', 2],
    ['a lone low surrogate counts once', '\udc00', 1],
    ['the empty string', '', 0],
  ])('%s', (_case, text, expected) => {
    expect(codePointLength(text)).toBe(expected);
  });

  it('agrees with iterating by code point', () => {
    const text = `a\u{1f600}\ud800b\u2764\ufe0f\udc00\u{10ffff}`;
    expect(codePointLength(text)).toBe([...text].length);
  });

  it('refuses U+0000 and lone surrogates, and keeps surrogate pairs', () => {
    expect(storable('do_not_honor\u0000')).toBe(false);
    expect(storable('\ud800')).toBe(false);
    expect(storable('x\udfff')).toBe(false);
    expect(storable('\u{1f600}')).toBe(true);
  });

  it('bounds by code points, not UTF-16 units', () => {
    expect(storableWithin('\u2764\ufe0f'.repeat(32), 1, 64)).toBe(true);
    expect(storableWithin('\u2764\ufe0f'.repeat(33), 1, 64)).toBe(false);
    expect(storableWithin('\u{1f600}'.repeat(64), 1, 64)).toBe(true);
    expect(storableWithin('\u{1f600}'.repeat(65), 1, 64)).toBe(false);
    expect(storableWithin('', 1, 64)).toBe(false);
    expect(storableWithin('a\u0000', 1, 64)).toBe(false);
  });
});
