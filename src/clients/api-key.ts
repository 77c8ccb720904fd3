import { createHash, randomBytes } from 'node:crypto';
import { newUlid } from '../common/ulid';

const API_KEY_PREFIX = 'sk_';

/** `key_` and a ULID: the public name of one API key, what client:key and client:list show. */
export const API_KEY_ID_PATTERN = /^key_[0-9A-HJKMNP-TV-Z]{26}$/;

export function newApiKeyId(): string {
  return `key_${newUlid()}`;
}

/**
 * What client:list shows of a key so an operator can tell which one a
 * merchant holds: `sk_` and its first six characters, 36 of its 256 random
 * bits; the 220 left keep it as unguessable as ever. Short of the eight
 * characters the log redaction looks for, so it is never mistaken for a key.
 */
export function apiKeyPrefix(apiKey: string): string {
  return apiKey.slice(0, API_KEY_PREFIX.length + 6);
}

/** 32 random bytes: shown once to the operator, never stored. */
export function generateApiKey(): string {
  return `${API_KEY_PREFIX}${randomBytes(32).toString('base64url')}`;
}

/**
 * A Standard Webhooks signing secret: `whsec_` and the base64 of 24 random
 * bytes (192 bits, the size the specification's own tooling generates).
 */
export function generateWebhookSecret(): string {
  return `whsec_${randomBytes(24).toString('base64')}`;
}

/** What generateApiKey makes: the prefix and 43 base64url characters. */
const API_KEY_SHAPE = /^sk_[A-Za-z0-9_-]{43}$/;

export function isApiKeyShaped(candidate: string): boolean {
  return API_KEY_SHAPE.test(candidate);
}

/**
 * SHA-256 is enough here, unlike for passwords: a key carries 256 random bits,
 * so there is no dictionary to try, and a fast hash keeps auth to one indexed
 * lookup per request.
 */
export function hashApiKey(apiKey: string): string {
  return createHash('sha256').update(apiKey).digest('hex');
}
