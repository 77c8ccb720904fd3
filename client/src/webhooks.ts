import { createHmac, timingSafeEqual } from 'node:crypto';
import { WebhookVerificationError } from './errors.js';
import type { Event } from './types.js';

/** A request's headers as a framework hands them over: a fetch Headers, or Node's object of lower-cased names. */
export type WebhookHeaders = Headers | Record<string, string | string[] | undefined>;

export interface VerifyOptions {
  /** How far webhook-timestamp may be from now, either way, in seconds. Default 300 (five minutes). */
  toleranceSeconds?: number;
  /** The wall clock, in epoch milliseconds; for tests. */
  now?: () => number;
}

const DEFAULT_TOLERANCE_SECONDS = 5 * 60;
const SECRET_PREFIX = 'whsec_';

/**
 * Verifies a webhook per Standard Webhooks and returns its event: the
 * signature is `v1,` and the base64 HMAC-SHA256, keyed with the secret's
 * bytes (the base64 after `whsec_`), of `${webhook-id}.${webhook-timestamp}.${body}`;
 * webhook-signature may list several, space-separated (a secret being
 * rotated), and one match is enough. Throws WebhookVerificationError for a
 * missing header, a timestamp further than the tolerance from now (a captured
 * request replayed later), no matching signature, or a body that is not an
 * event.
 *
 * `rawBody` must be the bytes received (a Buffer, or the string they
 * decode to): a body parsed and serialised again does not verify.
 */
export function verifyWebhook(rawBody: string | Uint8Array, headers: WebhookHeaders, secret: string, options: VerifyOptions = {}): Event {
  const id = header(headers, 'webhook-id');
  const timestamp = header(headers, 'webhook-timestamp');
  const signatures = header(headers, 'webhook-signature');

  if (!/^\d{1,15}$/.test(timestamp)) throw new WebhookVerificationError('webhook-timestamp is not a number of seconds');
  const toleranceSeconds = options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS;
  const nowSeconds = Math.floor((options.now ?? Date.now)() / 1000);
  const skew = nowSeconds - Number(timestamp);
  if (skew > toleranceSeconds) throw new WebhookVerificationError(`webhook-timestamp is ${skew} s old, past the tolerance of ${toleranceSeconds} s`);
  if (-skew > toleranceSeconds) throw new WebhookVerificationError(`webhook-timestamp is ${-skew} s ahead, past the tolerance of ${toleranceSeconds} s`);

  const expected = createHmac('sha256', secretKey(secret)).update(`${id}.${timestamp}.`).update(rawBody).digest();
  const matches = signatures.split(' ').some((entry) => {
    const [version, signature] = entry.split(',', 2);
    if (version !== 'v1' || !signature) return false;
    const given = Buffer.from(signature, 'base64');
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
  if (!matches) throw new WebhookVerificationError('no webhook-signature matches the body with this secret');

  let event: unknown;
  try {
    event = JSON.parse(typeof rawBody === 'string' ? rawBody : new TextDecoder().decode(rawBody));
  } catch (error) {
    throw new WebhookVerificationError('the signed body is not JSON', { cause: error });
  }
  const candidate = event as Partial<Event> | null;
  if (typeof candidate !== 'object' || candidate === null || candidate.object !== 'event' || typeof candidate.id !== 'string') {
    throw new WebhookVerificationError('the signed body is not an event');
  }
  return candidate as Event;
}

/** One header's value; a missing, empty or repeated one is refused. */
function header(headers: WebhookHeaders, name: string): string {
  let value: string | string[] | null | undefined;
  if (typeof (headers as Headers).get === 'function') {
    value = (headers as Headers).get(name);
  } else {
    const record = headers as Record<string, string | string[] | undefined>;
    const key = Object.keys(record).find((candidate) => candidate.toLowerCase() === name);
    value = key === undefined ? undefined : record[key];
  }
  if (Array.isArray(value)) {
    if (value.length !== 1) throw new WebhookVerificationError(`${name} is given ${value.length} times`);
    value = value[0];
  }
  if (!value) throw new WebhookVerificationError(`${name} header missing`);
  return value;
}

/** The HMAC key: the bytes of the base64 after `whsec_` (a bare base64 secret is read the same way). */
function secretKey(secret: string): Buffer {
  const encoded = secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret;
  const key = Buffer.from(encoded, 'base64');
  if (key.length === 0) throw new WebhookVerificationError('the webhook secret is empty or not base64');
  return key;
}
