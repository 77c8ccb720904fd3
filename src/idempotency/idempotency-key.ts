import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';
import { DomainError, ErrorCode } from '../common/domain-error';

const MAX_KEY_LENGTH = 255;
const PRINTABLE_ASCII = /^[\x20-\x7e]+$/;

/**
 * Reads the Idempotency-Key header. Both forms mean the same key: a bare token
 * (`8e03...`) and the structured-field string of the IETF draft (`"8e03..."`,
 * where `\"` and `\\` are the only escapes). Only an absent header is
 * "missing": one that is present but empty or blank is an invalid key.
 */
export function parseIdempotencyKey(header: string | string[] | undefined): string {
  const values = header === undefined ? [] : Array.isArray(header) ? header : [header];
  if (values.length === 0) {
    throw new DomainError(ErrorCode.IdempotencyKeyMissing, 'An Idempotency-Key header is required.');
  }
  if (values.length > 1) throw invalid('Send exactly one Idempotency-Key header.');
  const key = values[0].startsWith('"') ? unquote(values[0]) : values[0];
  if (key.length > MAX_KEY_LENGTH || !PRINTABLE_ASCII.test(key)) {
    throw invalid(`The Idempotency-Key must be 1 to ${MAX_KEY_LENGTH} printable ASCII characters.`);
  }
  if (key.trim() === '') throw invalid('The Idempotency-Key must not be blank.');
  return key;
}

/** The content of a quoted key; the closing quote must be the last character, and an escaped quote is not one. */
function unquote(value: string): string {
  let key = '';
  for (let i = 1; i < value.length; i++) {
    const char = value[i];
    if (char === '"') {
      if (i !== value.length - 1) throw invalid('A quoted Idempotency-Key must escape inner double quotes.');
      return key;
    }
    if (char === '\\') {
      const next = value[++i];
      if (next !== '"' && next !== '\\') throw invalid('Only \\" and \\\\ may be escaped in an Idempotency-Key.');
      key += next;
    } else {
      key += char;
    }
  }
  throw invalid('A quoted Idempotency-Key must end with a double quote.');
}

function invalid(message: string): DomainError {
  return new DomainError(ErrorCode.IdempotencyKeyInvalid, message);
}

/**
 * SHA-256 of the method, the path and the canonical JSON of the body
 * (RFC 8785: sorted keys, no white space), so two requests that differ only in
 * key order or spacing are the same request. A route with parameters
 * (`/v1/webhook_endpoints/:id`) adds their canonical JSON to the path: the
 * same body sent to two endpoints is two requests.
 */
export function requestFingerprint(method: string, path: string, body: unknown, params: Record<string, string> = {}): string {
  const canonicalBody = canonicalize(body ?? null) ?? 'null';
  const route = Object.keys(params).length === 0 ? path : `${path} ${canonicalize(params)}`;
  return createHash('sha256').update(`${method.toUpperCase()} ${route}\n${canonicalBody}`).digest('hex');
}
