import { types } from 'node:util';
import { QueryFailedError } from 'typeorm';
import { REQUEST_ID_HEADER } from './request-id';

/** API keys (sk_…) and webhook secrets (whsec_…), wherever they appear in a string. */
const SECRET = /\b(?:sk|whsec)_[A-Za-z0-9+/=_-]{8,}/g;
const REDACTED = '[redacted]';
/**
 * The user name and password of a URL (`https://user:password@host`), up to
 * its last @ before the path: a password may hold an @ of its own.
 */
const URL_CREDENTIALS = /\b([a-z][a-z0-9+.-]*:\/\/)[^\s/?#]*@/gi;

/** Headers whose whole value is a credential, whatever its shape. */
const CREDENTIAL_HEADERS = new Set(['authorization', 'proxy-authorization', 'x-api-key', 'cookie', 'webhook-signature']);

/**
 * Keys, webhook secrets and a URL's credentials, wherever they appear in a
 * string. Most strings logged (a header's value, a path) hold neither an
 * underscore, which every key and secret has, nor an @, which URL credentials
 * end with: those are returned as they are, without running the expressions.
 */
export function redactSecrets(text: string): string {
  if (!text.includes('_') && !text.includes('@')) return text;
  return text.replace(SECRET, REDACTED).replace(URL_CREDENTIALS, `$1${REDACTED}@`);
}

/**
 * An error as it may be logged: its class, SQLSTATE and a message with
 * anything key-shaped removed; never a statement's text or parameters (they
 * hold what clients sent: descriptions, metadata, ids) and never a stack.
 * A database error keeps only its SQLSTATE and the constraint or table it
 * names: Postgres messages quote the offending values.
 */
export function errorForLog(error: unknown): Record<string, string | undefined> {
  if (error instanceof QueryFailedError) {
    const driverError = error.driverError as { code?: string; constraint?: string; table?: string };
    return { type: 'QueryFailedError', code: driverError.code, constraint: driverError.constraint, table: driverError.table };
  }
  // isNativeError too: an error made in another realm (a vm context, as under
  // jest) is not an instance of this realm's Error.
  if (error instanceof Error || types.isNativeError(error)) {
    const { code } = error as { code?: unknown };
    return { type: error.name, code: typeof code === 'string' ? code : undefined, message: redactSecrets(error.message) };
  }
  return { type: typeof error, message: redactSecrets(String(error)) };
}

/**
 * errorForLog for an error pino-http has already serialized (its standard
 * serializer runs first and hands ours a plain object with the stack):
 * class, code and redacted message, and nothing else.
 */
export function serializedErrorForLog(serialized: { type?: unknown; code?: unknown; message?: unknown }): Record<string, string | undefined> {
  return {
    type: typeof serialized.type === 'string' ? serialized.type : 'Error',
    code: typeof serialized.code === 'string' ? serialized.code : undefined,
    message: redactSecrets(String(serialized.message ?? '')),
  };
}

/** Longest client request id kept in a log line. */
const CLIENT_REQUEST_ID_MAX = 128;

/**
 * The X-Request-Id a client sent, as it may be logged: secrets redacted
 * first (so the cut cannot leave half a key unrecognised), anything but
 * printable ASCII replaced, and cut to CLIENT_REQUEST_ID_MAX characters.
 */
function clientRequestIdForLog(value: unknown): string | undefined {
  if (value === undefined) return undefined;
  return redactSecrets(String(value)).replace(/[^\x20-\x7e]/g, '?').slice(0, CLIENT_REQUEST_ID_MAX);
}

/**
 * What a request log line says of the request: no credential header, no key
 * in the URL; the id is ours, and the client's X-Request-Id is a field of its
 * own (clientRequestId) rather than a header.
 */
export function requestForLog(request: {
  id?: unknown;
  method?: string;
  url?: string;
  headers?: Record<string, unknown>;
}): Record<string, unknown> {
  const { [REQUEST_ID_HEADER]: clientRequestId, ...others } = request.headers ?? {};
  const headers = Object.fromEntries(
    Object.entries(others).map(([name, value]) => [
      name,
      CREDENTIAL_HEADERS.has(name.toLowerCase()) ? REDACTED : redactSecrets(String(value)),
    ]),
  );
  return {
    id: request.id,
    clientRequestId: clientRequestIdForLog(clientRequestId),
    method: request.method,
    url: redactSecrets(request.url ?? ''),
    headers,
  };
}
