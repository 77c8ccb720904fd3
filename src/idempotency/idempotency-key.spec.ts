import { DomainError, ErrorCode } from '../common/domain-error';
import { parseIdempotencyKey, requestFingerprint } from './idempotency-key';

function codeOf(header: string | string[] | undefined): ErrorCode | undefined {
  try {
    parseIdempotencyKey(header);
    return undefined;
  } catch (error) {
    return (error as DomainError).code;
  }
}

describe('parseIdempotencyKey', () => {
  it('accepts a bare token', () => {
    expect(parseIdempotencyKey('8e03978e-40d5-43e8-bc93-6894a57f9324')).toBe('8e03978e-40d5-43e8-bc93-6894a57f9324');
  });

  it('reads the quoted structured-field form as the same key', () => {
    expect(parseIdempotencyKey('"8e03978e"')).toBe(parseIdempotencyKey('8e03978e'));
  });

  it('unescapes \\" and \\\\ inside a quoted key', () => {
    expect(parseIdempotencyKey('"a\\"b\\\\c"')).toBe('a"b\\c');
  });

  it('accepts 255 characters and refuses 256', () => {
    expect(parseIdempotencyKey('k'.repeat(255))).toHaveLength(255);
    expect(codeOf('k'.repeat(256))).toBe(ErrorCode.IdempotencyKeyInvalid);
  });

  it.each([
    ['missing', undefined, ErrorCode.IdempotencyKeyMissing],
    ['empty', '', ErrorCode.IdempotencyKeyInvalid],
    ['blank', '   ', ErrorCode.IdempotencyKeyInvalid],
    ['a quoted blank', '"  "', ErrorCode.IdempotencyKeyInvalid],
    ['non-ASCII', 'clé', ErrorCode.IdempotencyKeyInvalid],
    ['a control character', 'a\tb', ErrorCode.IdempotencyKeyInvalid],
    ['an unterminated quote', '"abc', ErrorCode.IdempotencyKeyInvalid],
    ['a closing quote that is escaped', '"abc\\"', ErrorCode.IdempotencyKeyInvalid],
    ['an escape at the end', '"abc\\', ErrorCode.IdempotencyKeyInvalid],
    ['a lone quote', '"', ErrorCode.IdempotencyKeyInvalid],
    ['an empty quoted string', '""', ErrorCode.IdempotencyKeyInvalid],
    ['an unescaped inner quote', '"a"b"', ErrorCode.IdempotencyKeyInvalid],
    ['a bad escape', '"a\\nb"', ErrorCode.IdempotencyKeyInvalid],
    ['two headers', ['a', 'b'], ErrorCode.IdempotencyKeyInvalid],
  ])('refuses %s', (_name, header, code) => {
    expect(codeOf(header)).toBe(code);
  });
});

describe('requestFingerprint', () => {
  const body = { amount: 500, currency: 'USD', metadata: { b: '2', a: '1' } };

  it('ignores key order at every depth', () => {
    const reordered = { metadata: { a: '1', b: '2' }, currency: 'USD', amount: 500 };
    expect(requestFingerprint('POST', '/v1/payments', reordered)).toBe(
      requestFingerprint('POST', '/v1/payments', body),
    );
  });

  it('ignores white space in the JSON text', () => {
    const spaced = JSON.parse(JSON.stringify(body, null, 4)) as unknown;
    expect(requestFingerprint('POST', '/v1/payments', spaced)).toBe(requestFingerprint('POST', '/v1/payments', body));
  });

  it('changes with any value, the method or the path', () => {
    const base = requestFingerprint('POST', '/v1/payments', body);
    expect(requestFingerprint('POST', '/v1/payments', { ...body, amount: 501 })).not.toBe(base);
    expect(requestFingerprint('PUT', '/v1/payments', body)).not.toBe(base);
    expect(requestFingerprint('POST', '/v1/refunds', body)).not.toBe(base);
  });

  it('is a SHA-256 in hex', () => {
    expect(requestFingerprint('POST', '/v1/payments', body)).toMatch(/^[0-9a-f]{64}$/);
  });
});
