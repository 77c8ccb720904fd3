import { LIMIT_PROBE_KEY_PREFIX, type Who } from './arbitraries';
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

/**
 * The client's text fields and their limits in code points, as Postgres'
 * length() counts them (src/payments/payments.dto.ts, the schema's checks):
 * never UTF-16 units, graphemes or what validator.js counts.
 */
export const TEXT_LIMITS: Record<'payment_method' | 'order_id' | 'description', { min: number; max: number }> = {
  payment_method: { min: 1, max: 255 },
  order_id: { min: 1, max: 64 },
  description: { min: 0, max: 500 },
};
export const METADATA_LIMITS = { keys: 20, key: { min: 1, max: 40 }, value: { min: 0, max: 500 } };

const codePoints = (text: string) => [...text].length;
/** Text Postgres stores as it is: no U+0000, and (\p{Cs} in a `u` expression) no lone surrogate. */
const storable = (text: string) => !text.includes('\u0000') && !/\p{Cs}/u.test(text);

function textProblem(text: string, { min, max }: { min: number; max: number }): string | undefined {
  if (!storable(text)) return 'holds U+0000 or a lone surrogate';
  const length = codePoints(text);
  return length < min || length > max ? `is ${length} code points, not ${min} to ${max}` : undefined;
}

export interface FieldProblem {
  /** The field a 400 must name: order_id, description, payment_method or metadata. */
  param: string;
  problem: string;
}

/** Where the text fields of a payment body break the contract's limits, counted in code points. */
export function textFieldProblems(body: unknown): FieldProblem[] {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return [];
  const fields = body as Record<string, unknown>;
  const problems: FieldProblem[] = [];
  for (const [param, limits] of Object.entries(TEXT_LIMITS)) {
    const value = fields[param];
    const problem = typeof value === 'string' ? textProblem(value, limits) : undefined;
    if (problem) problems.push({ param, problem: `${param} ${problem}` });
  }
  const metadata = fields.metadata;
  if (typeof metadata === 'object' && metadata !== null && !Array.isArray(metadata)) {
    const entries = Object.entries(metadata);
    if (entries.length > METADATA_LIMITS.keys) problems.push({ param: 'metadata', problem: `metadata has ${entries.length} keys` });
    for (const [key, value] of entries) {
      const keyProblem = textProblem(key, METADATA_LIMITS.key);
      if (keyProblem) problems.push({ param: 'metadata', problem: `a metadata key ${keyProblem}` });
      const valueProblem = typeof value === 'string' ? textProblem(value, METADATA_LIMITS.value) : undefined;
      if (valueProblem) problems.push({ param: 'metadata', problem: `metadata value of ${JSON.stringify(key.slice(0, 20))} ${valueProblem}` });
    }
  }
  return problems;
}

/** The chunks of a chunked body joined, or undefined when its framing is broken. */
function dechunk(framed: string): string | undefined {
  let body = '';
  for (let at = 0; ; ) {
    const end = framed.indexOf('\r\n', at);
    const size = end < 0 ? NaN : parseInt(framed.slice(at, end), 16);
    if (!Number.isInteger(size) || size < 0) return undefined;
    if (size === 0) return body;
    body += framed.slice(end + 2, end + 2 + size);
    at = end + 2 + size + 2;
  }
}

/**
 * A request's body as the server reads it, parsed: undefined when the bytes
 * are not UTF-8 JSON (the latin1 and UTF-16 bodies, broken framing).
 */
export function requestBodyOf(bytes: string): unknown {
  const split = bytes.indexOf('\r\n\r\n');
  if (split < 0) return undefined;
  const head = bytes.slice(0, split);
  const framed = bytes.slice(split + 4);
  const raw = /^transfer-encoding:[ \t]*chunked[ \t]*$/im.test(head) ? dechunk(framed) : framed;
  if (raw === undefined) return undefined;
  try {
    return JSON.parse(new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(Buffer.from(raw, 'latin1')));
  } catch {
    return undefined;
  }
}

/** The payment an answer to a create shows: a 201 or 202's body, a 402's error.payment. */
function paymentIn(answer: WireAnswer): Record<string, unknown> | undefined {
  if (![201, 202, 402].includes(answer.status)) return undefined;
  const body = parseJson(answer.body) as { object?: unknown; error?: { payment?: unknown } } | undefined;
  const payment = answer.status === 402 ? body?.error?.payment : body?.object === 'payment' ? body : undefined;
  return typeof payment === 'object' && payment !== null ? (payment as Record<string, unknown>) : undefined;
}

const sameEntries = (a: object, b: object) =>
  JSON.stringify(Object.entries(a).sort(([x], [y]) => (x < y ? -1 : 1))) === JSON.stringify(Object.entries(b).sort(([x], [y]) => (x < y ? -1 : 1)));

/** A value in a finding: JSON, cut to 60 characters, every character past ASCII as \u{…} (so é and e + U+0301 differ to the eye). */
const shown = (value: unknown) => {
  const text = JSON.stringify(value) ?? String(value);
  const cut = [...text].length > 60 ? `${[...text].slice(0, 60).join('')}…` : text;
  return cut.replace(/[^\x20-\x7e…]/gu, (char) => `\\u{${char.codePointAt(0)!.toString(16)}}`);
};

/**
 * What a payment made from this body must not be: made at all when a text
 * field breaks its limit (that is a 400 naming the field), or showing a text
 * field otherwise than it was sent (cut, normalized, repaired).
 */
export function madePaymentProblems(body: unknown, payment: Record<string, unknown>): string[] {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return [];
  const fields = body as Record<string, unknown>;
  const problems = textFieldProblems(body).map(({ problem }) => `a payment was made from a body whose ${problem}, not a 400 naming it`);
  for (const field of Object.keys(TEXT_LIMITS)) {
    if (typeof fields[field] === 'string' && payment[field] !== fields[field]) {
      problems.push(`the payment shows ${field} ${shown(payment[field])} for ${shown(fields[field])} sent`);
    }
  }
  const metadata = fields.metadata;
  if (typeof metadata === 'object' && metadata !== null && !Array.isArray(metadata) && Object.values(metadata).every((v) => typeof v === 'string')) {
    const stored = payment.metadata;
    if (typeof stored !== 'object' || stored === null || !sameEntries(stored, metadata)) {
      problems.push(`the payment shows metadata ${shown(stored)} for ${shown(metadata)} sent`);
    }
  }
  return problems;
}

/**
 * A limit probe (arbitraries' nearLimitCreateRequest, known by its key) is a
 * clean body but for one text field near its limit: past the limit it must be
 * a 400 parameter_invalid whose param names that field (param `metadata` or
 * `metadata.<key>` for metadata); within it, anything but a 400 (201, 202,
 * 402, or 409 for an order already paid).
 */
export function limitProbeProblems(bytes: string, answer: WireAnswer): string[] {
  const key = /^Idempotency-Key: *([^\r\n]*)\r?$/im.exec(bytes.slice(0, bytes.indexOf('\r\n\r\n')))?.[1];
  if (key === undefined || !key.startsWith(LIMIT_PROBE_KEY_PREFIX)) return [];
  const body = requestBodyOf(bytes);
  const problems = textFieldProblems(body);
  const error = (parseJson(answer.body) as { error?: { code?: unknown; param?: unknown } } | undefined)?.error;
  if (problems.length === 0) {
    return answer.status === 400 ? [`a limit probe within every limit was refused: ${shown(error)}`] : [];
  }
  const named = problems.some(({ param }) => error?.param === param || (typeof error?.param === 'string' && error.param.startsWith(`${param}.`)));
  if (answer.status === 400 && error?.code === 'parameter_invalid' && named) return [];
  // A 5xx is a server error, and a payment made is madePaymentProblems' finding: each counted once.
  if (answer.status >= 500 || paymentIn(answer) !== undefined) return [];
  return [`${problems[0].problem}: answered ${answer.status} ${shown(error?.code)} param ${shown(error?.param)}, not 400 parameter_invalid naming ${problems[0].param}`];
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

  if (method === 'POST') {
    const payment = paymentIn(answer);
    if (payment) for (const problem of madePaymentProblems(requestBodyOf(request.bytes), payment)) note('contract', problem);
    for (const problem of limitProbeProblems(request.bytes, answer)) note('contract', problem);
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
