import { bodyProblem } from './json-body';

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
