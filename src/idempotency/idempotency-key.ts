import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';
import { DomainError, ErrorCode } from '../common/domain-error';

const MAX_KEY_LENGTH = 255;
const PRINTABLE_ASCII = /^[\x20-\x7e]+$/;

/**
 * Reads the Idempotency-Key header. Both forms mean the same key: a bare token
 * (`8e03...`) and the structured-field string of the IETF draft (`"8e03..."`,
 * where `\"` and `\\` are the only escapes).
 */
export function parseIdempotencyKey(header: string | string[] | undefined): string {
  const values = header === undefined ? [] : Array.isArray(header) ? header : [header];
  if (values.length > 1) throw invalid('Send exactly one Idempotency-Key header.');
  const value = (values[0] ?? '').trim();
  if (value === '') {
    throw new DomainError(ErrorCode.IdempotencyKeyMissing, 'An Idempotency-Key header is required.');
  }
  const key = value.startsWith('"') ? unquote(value) : value;
  if (key.length === 0 || key.length > MAX_KEY_LENGTH || !PRINTABLE_ASCII.test(key)) {
    throw invalid(`The Idempotency-Key must be 1 to ${MAX_KEY_LENGTH} printable ASCII characters.`);
  }
  return key;
}

function unquote(value: string): string {
  if (value.length < 2 || !value.endsWith('"')) {
    throw invalid('A quoted Idempotency-Key must end with a double quote.');
  }
  let key = '';
  for (let i = 1; i < value.length - 1; i++) {
    const char = value[i];
    if (char === '"') throw invalid('A quoted Idempotency-Key must escape inner double quotes.');
    if (char === '\\') {
      const next = value[++i];
      if (next !== '"' && next !== '\\') throw invalid('Only \\" and \\\\ may be escaped in an Idempotency-Key.');
      key += next;
    } else {
      key += char;
    }
  }
  return key;
}

function invalid(message: string): DomainError {
  return new DomainError(ErrorCode.IdempotencyKeyInvalid, message);
}

/**
 * SHA-256 of the method, the path and the canonical JSON of the body
 * (RFC 8785: sorted keys, no white space), so two requests that differ only in
 * key order or spacing are the same request.
 */
export function requestFingerprint(method: string, path: string, body: unknown): string {
  const canonicalBody = canonicalize(body ?? null) ?? 'null';
  return createHash('sha256').update(`${method.toUpperCase()} ${path}\n${canonicalBody}`).digest('hex');
}
