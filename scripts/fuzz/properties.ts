import type { Who } from './arbitraries';
import type { Exchange, WireAnswer } from './http';
import type { ResolvedRequest } from './wire';

/**
 * What every answer must be, whatever was sent: never a 5xx, an error in the
 * contract's envelope with its content type and the headers every answer
 * carries, and nothing of another client's. Checks of one exchange at a time;
 * what needs the database (rows written, owners of ids the run did not see
 * made) is judged per batch by the engine.
 */

export type ViolationKind = 'server_error' | 'no_answer' | 'envelope' | 'tenancy' | 'contract' | 'write';

export interface Finding {
  kind: ViolationKind;
  message: string;
}

/** Each error code of the contract (README "Errors", src/common/error-envelope.ts) with its status and type. */
const ERROR_CODES: Record<string, [number, string]> = {
  parameter_invalid: [400, 'invalid_request_error'],
  request_malformed: [400, 'invalid_request_error'],
  body_invalid_json: [400, 'invalid_request_error'],
  idempotency_key_missing: [400, 'invalid_request_error'],
  idempotency_key_invalid: [400, 'invalid_request_error'],
  webhook_signature_invalid: [400, 'invalid_request_error'],
  request_timeout: [408, 'invalid_request_error'],
  expectation_failed: [417, 'invalid_request_error'],
  body_too_large: [413, 'invalid_request_error'],
  unsupported_media_type: [415, 'invalid_request_error'],
  unauthenticated: [401, 'authentication_error'],
  resource_missing: [404, 'invalid_request_error'],
  route_not_found: [404, 'invalid_request_error'],
  method_not_allowed: [405, 'invalid_request_error'],
  request_headers_too_large: [431, 'invalid_request_error'],
  rate_limited: [429, 'rate_limit_error'],
  idempotency_key_in_use: [409, 'idempotency_error'],
  order_already_paid: [409, 'invalid_request_error'],
  payment_busy: [409, 'api_error'],
  idempotency_key_reused: [422, 'idempotency_error'],
  card_declined: [402, 'card_error'],
  provider_unavailable: [503, 'api_error'],
  service_unavailable: [503, 'api_error'],
  internal_error: [500, 'api_error'],
};

const JSON_TYPE = /^application\/json(; ?charset=utf-8)?$/i;
/** The ids of what a client owns: payments, and the events about them. */
const RESOURCE_ID = /(?:pay|evt)_[0-9A-HJKMNP-TV-Z]{26}/g;
/** Routes anyone may call: a 2xx there needs no key. */
const PUBLIC_PATH = /^\/(health|docs)|^\/v1\/provider\/events/i;

function header(answer: WireAnswer, name: string): string | undefined {
  return answer.headers[name]?.[0];
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** Problems with an error body, or none: `{"error":{type,code,message,param?}}` and nothing else but what its code adds. */
export function envelopeProblems(status: number, body: unknown): string[] {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return ['the body is not a JSON object'];
  const keys = Object.keys(body);
  if (keys.length !== 1 || keys[0] !== 'error') return [`top-level keys are ${JSON.stringify(keys)}, not ["error"]`];
  const error = (body as { error: unknown }).error;
  if (typeof error !== 'object' || error === null || Array.isArray(error)) return ['error is not an object'];
  const { type, code, message, param, ...extra } = error as Record<string, unknown>;
  const problems: string[] = [];
  const known = typeof code === 'string' ? ERROR_CODES[code] : undefined;
  if (!known) problems.push(`error.code ${JSON.stringify(code)} is not one of the contract's`);
  else if (known[0] !== status || known[1] !== type) {
    problems.push(`${JSON.stringify(code)} comes with ${known[0]} ${known[1]}, not ${status} ${JSON.stringify(type)}`);
  }
  if (typeof message !== 'string' || message.length === 0) problems.push('error.message is not a non-empty string');
  if (param !== undefined && typeof param !== 'string') problems.push('error.param is not a string');
  for (const [name, value] of Object.entries(extra)) {
    const allowed =
      (name === 'request_id' && status >= 500 && typeof value === 'string') ||
      (name === 'payment' && code === 'card_declined' && typeof value === 'object' && value !== null);
    if (!allowed) problems.push(`error.${name} is not part of the envelope for ${status} ${String(code)}`);
  }
  return problems;
}

/** The payment and event ids in an answer that the request did not itself name. */
export function resourceIdsIn(answer: WireAnswer, request: ResolvedRequest): string[] {
  return [...new Set(answer.body.match(RESOURCE_ID) ?? [])].filter((id) => !request.bytes.includes(id));
}

export function targetPath(bytes: string): string {
  return bytes.slice(bytes.indexOf(' ') + 1).split(/[ ?\r\n]/)[0] ?? '';
}

/**
 * The checks of one exchange. `ownerOf` answers for ids the run has seen
 * made; ids it does not know go back in `unknownIds` for the engine to look up.
 */
export function checkExchange(
  method: string,
  request: ResolvedRequest,
  exchange: Exchange,
  ownerOf: (id: string) => Who | undefined,
): { findings: Finding[]; unknownIds: string[] } {
  if (exchange.kind === 'no-answer') {
    return { findings: [{ kind: 'no_answer', message: `no answer: ${exchange.why}` }], unknownIds: [] };
  }
  const { answer } = exchange;
  const findings: Finding[] = [];
  const note = (kind: ViolationKind, message: string) => findings.push({ kind, message });

  if (answer.status >= 500) note('server_error', `answered ${answer.status}`);
  const missing = ['x-request-id', 'x-content-type-options', 'cache-control'].filter((name) => header(answer, name) === undefined);
  if (missing.length > 0) note('envelope', `no ${missing.join(', ')} header`);
  else if (header(answer, 'x-content-type-options') !== 'nosniff' || header(answer, 'cache-control') !== 'no-store') {
    note('envelope', 'X-Content-Type-Options or Cache-Control is not nosniff / no-store');
  }

  const hasBody = method !== 'HEAD' && answer.status !== 204 && answer.status !== 304;
  const contentType = header(answer, 'content-type');
  if (answer.status >= 400 && hasBody) {
    if (!contentType || !JSON_TYPE.test(contentType)) note('envelope', `an error with Content-Type ${JSON.stringify(contentType)}`);
    for (const problem of envelopeProblems(answer.status, parseJson(answer.body))) note('envelope', problem);
    if (answer.status === 405 && header(answer, 'allow') === undefined) note('envelope', 'a 405 without Allow');
  } else if (answer.status >= 200 && answer.status < 300 && hasBody && contentType && JSON_TYPE.test(contentType)) {
    if (parseJson(answer.body) === undefined) note('envelope', 'a JSON Content-Type on a body that is not JSON');
  }

  const path = targetPath(request.bytes);
  if (answer.status >= 200 && answer.status < 300 && request.credentials.size === 0 && !PUBLIC_PATH.test(path)) {
    note('tenancy', `a ${answer.status} for ${path} without any client's key`);
  }
  const unknownIds: string[] = [];
  for (const id of resourceIdsIn(answer, request)) {
    const owner = ownerOf(id);
    if (owner === undefined) unknownIds.push(id);
    else if (!request.credentials.has(owner)) note('tenancy', `the answer shows ${id}, client ${owner}'s`);
  }

  const expected = request.expect;
  if (expected) {
    const code = (parseJson(answer.body) as { error?: { code?: unknown } } | undefined)?.error?.code;
    const id = (parseJson(answer.body) as { id?: unknown } | undefined)?.id;
    const kind: ViolationKind = expected.why.startsWith('another') ? 'tenancy' : 'contract';
    if (answer.status !== expected.status) note(kind, `${expected.why}: answered ${answer.status}, not ${expected.status}`);
    else if (expected.code !== undefined && code !== expected.code) note(kind, `${expected.why}: code ${String(code)}, not ${expected.code}`);
    else if (expected.id !== undefined && id !== expected.id) note(kind, `${expected.why}: the body is ${String(id)}, not ${expected.id}`);
  }
  return { findings, unknownIds };
}
