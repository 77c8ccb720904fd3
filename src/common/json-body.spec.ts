import { bodyProblem, duplicateKey } from './json-body';

describe('bodyProblem', () => {
  it('accepts an ordinary payment body', () => {
    expect(
      bodyProblem({ amount: 500, currency: 'USD', payment_method: 'pm_card_ok', metadata: { cart: 'é 🙂' } }),
    ).toBeUndefined();
  });

  it.each([
    ['a number out of range', JSON.parse('{"amount":1e309}'), 'amount'],
    ['a lone surrogate in a value', { description: 'a\ud800b' }, 'description'],
    ['U+0000 in a nested value', { metadata: { note: 'a\u0000' } }, 'metadata.note'],
    ['a lone surrogate in a key', { metadata: { '\udc00': 'x' } }, 'metadata'],
    ['U+0000 in a top-level key', { 'a\u0000': 1 }, ''],
  ])('finds %s and names the field', (_case, body, param) => {
    expect(bodyProblem(body)).toEqual({ param, message: expect.any(String) });
  });

  it('refuses nesting past the cap without recursing, however deep', () => {
    const deep = JSON.parse(`${'['.repeat(100_000)}${']'.repeat(100_000)}`) as unknown;

    expect(bodyProblem(deep)?.message).toMatch(/nested more than 16 levels deep/);
  });
});

describe('duplicateKey', () => {
  it.each([
    ['a payment body', '{"amount":500,"currency":"USD","metadata":{"a":"1","b":"2"}}'],
    ['the same key in sibling objects', '{"a":{"k":1},"b":{"k":2},"c":[{"k":1},{"k":2}]}'],
    ['a value equal to its key', '{"a":"a","b":["a","b"]}'],
    ['key-like text inside a string', '{"a":"x\\",\\"a\\":1","b":"\\\\"}'],
    ['keys that differ by an escaped backslash', '{"a\\\\":1,"a":2}'],
    ['white space between the tokens', ' { "a" : 1 ,\n "b" : { "a" : 2 } } '],
    ['a bare value', '"a"'],
  ])('finds none in %s', (_case, text) => {
    expect(() => JSON.parse(text) as unknown).not.toThrow();
    expect(duplicateKey(text)).toBeUndefined();
  });

  it.each([
    ['at the top level', '{"amount":500,"amount":1}', 'amount'],
    ['in a nested object', '{"amount":500,"metadata":{"k":"1","k":"2"}}', 'metadata.k'],
    ['spelled with an escape', '{"amount":500,"\\u0061mount":1}', 'amount'],
    ['in non-ASCII', '{"é":1,"\\u00e9":2}', 'é'],
    ['in an array', '{"m":[1,{"x":1,"x":2}]}', 'm.1.x'],
    ['after an empty key', '{"":1,"":2}', ''],
  ])('finds one %s and names its path', (_case, text, path) => {
    expect(() => JSON.parse(text) as unknown).not.toThrow();
    expect(duplicateKey(text)).toBe(path);
  });

  it('walks any depth without recursing', () => {
    const deep = `${'['.repeat(100_000)}{"a":1,"a":2}${']'.repeat(100_000)}`;

    expect(duplicateKey(deep)).toBe(`${'0.'.repeat(100_000)}a`);
  });
});
