import { type WireAnswer, parseAnswer } from './http';
import { checkExchange, envelopeProblems, madePaymentProblems, requestBodyOf, textFieldProblems } from './properties';
import type { ResolvedRequest } from './wire';

describe('envelopeProblems', () => {
  it('accepts the envelope, with param, and request_id on a 5xx only', () => {
    expect(envelopeProblems(400, { error: { type: 'invalid_request_error', code: 'parameter_invalid', message: 'm', param: 'amount' } })).toEqual([]);
    expect(envelopeProblems(500, { error: { type: 'api_error', code: 'internal_error', message: 'm', request_id: 'req_1' } })).toEqual([]);
    expect(envelopeProblems(402, { error: { type: 'card_error', code: 'card_declined', message: 'm', payment: { id: 'pay_1' } } })).toEqual([]);
  });

  it.each([
    ['HTML', 400, undefined, 'the body is not a JSON object'],
    ['a bare message', 400, { message: 'Bad Request' }, 'top-level keys are ["message"], not ["error"]'],
    ['a code the contract lacks', 400, { error: { type: 'invalid_request_error', code: 'nope', message: 'm' } }, 'error.code "nope" is not one of the contract\'s'],
    ['a status that is not the code\'s', 404, { error: { type: 'invalid_request_error', code: 'parameter_invalid', message: 'm' } }, '"parameter_invalid" comes with 400 invalid_request_error, not 404 "invalid_request_error"'],
    ['an empty message', 401, { error: { type: 'authentication_error', code: 'unauthenticated', message: '' } }, 'error.message is not a non-empty string'],
    ['a request id on a 4xx', 401, { error: { type: 'authentication_error', code: 'unauthenticated', message: 'm', request_id: 'r' } }, 'error.request_id is not part of the envelope for 401 unauthenticated'],
  ])('finds %s', (_case, status, body, problem) => {
    expect(envelopeProblems(status, body)).toContain(problem);
  });
});

describe('parseAnswer', () => {
  it('reads a chunked body, after a 100 Continue', () => {
    const bytes = Buffer.from('HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n');

    expect(parseAnswer(bytes)).toEqual({ status: 200, headers: { 'transfer-encoding': ['chunked'] }, body: 'abcde' });
  });

  it('keeps every value of a repeated header, and no body for a HEAD', () => {
    const bytes = Buffer.from('HTTP/1.1 405 Method Not Allowed\r\nAllow: GET\r\nallow: HEAD\r\nContent-Length: 10\r\n\r\n');

    expect(parseAnswer(bytes, true)).toEqual({ status: 405, headers: { allow: ['GET', 'HEAD'], 'content-length': ['10'] }, body: '' });
  });

  it('is undefined for an answer cut short', () => {
    expect(parseAnswer(Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc'))).toBeUndefined();
    expect(parseAnswer(Buffer.from('HTTP/1.1 200 OK\r\nContent-Le'))).toBeUndefined();
  });
});

const HEART = '\u2764\ufe0f';
const FAMILY = '\u{1F469}\u200d\u{1F469}\u200d\u{1F467}';

/** A POST /v1/payments as the wire writer frames it: UTF-8 bytes as latin1 text. */
function createBytes(body: unknown, key = 'fuzz-limit-1', chunked = false): string {
  const text = Buffer.from(JSON.stringify(body), 'utf8').toString('latin1');
  const framing = chunked ? `Transfer-Encoding: chunked\r\n\r\n${text.length.toString(16)}\r\n${text}\r\n0\r\n\r\n` : `Content-Length: ${text.length}\r\n\r\n${text}`;
  return `POST /v1/payments HTTP/1.1\r\nHost: x\r\nIdempotency-Key: ${key}\r\nContent-Type: application/json\r\n${framing}`;
}

const answerOf = (status: number, body: unknown): WireAnswer => ({
  status,
  headers: { 'content-type': ['application/json; charset=utf-8'], 'x-request-id': ['r'], 'x-content-type-options': ['nosniff'], 'cache-control': ['no-store'] },
  body: JSON.stringify(body),
});

const TEMPLATE = { amount: 500, currency: 'USD', payment_method: 'pm_card_ok' };
const paymentOf = (body: Record<string, unknown>) => ({
  id: 'pay_01JDQ2ZC4R5S8V9W0X1Y2Z3A4B',
  object: 'payment',
  status: 'succeeded',
  order_id: null,
  description: null,
  metadata: {},
  ...body,
});
const refusal = (param: string) => ({ error: { type: 'invalid_request_error', code: 'parameter_invalid', message: 'm', param } });

function contractFindings(bytes: string, answer: WireAnswer): string[] {
  const request: ResolvedRequest = { bytes, credentials: new Set(['A']) };
  return checkExchange('POST', request, { kind: 'answer', answer, ms: 1 }, () => 'A')
    .findings.filter((finding) => finding.kind === 'contract')
    .map((finding) => finding.message);
}

describe('textFieldProblems', () => {
  it('counts code points, as Postgres length() does: not UTF-16 units, graphemes or validator.js', () => {
    expect(textFieldProblems({ order_id: HEART.repeat(32) })).toEqual([]);
    expect(textFieldProblems({ order_id: HEART.repeat(33) })).toEqual([{ param: 'order_id', problem: 'order_id is 66 code points, not 1 to 64' }]);
    expect(textFieldProblems({ order_id: HEART.repeat(40) })).toEqual([{ param: 'order_id', problem: 'order_id is 80 code points, not 1 to 64' }]);
    expect(textFieldProblems({ order_id: '\u{1F600}'.repeat(64) })).toEqual([]);
    expect(textFieldProblems({ order_id: 'e\u0301'.repeat(33) })).toHaveLength(1);
    expect(textFieldProblems({ order_id: '' })).toHaveLength(1);
    expect(textFieldProblems({ description: HEART.repeat(250) })).toEqual([]);
    expect(textFieldProblems({ description: HEART.repeat(251) })).toEqual([{ param: 'description', problem: 'description is 502 code points, not 0 to 500' }]);
    expect(textFieldProblems({ payment_method: FAMILY.repeat(51) })).toEqual([]);
    expect(textFieldProblems({ payment_method: FAMILY.repeat(52) })).toHaveLength(1);
    expect(textFieldProblems({ metadata: { ['\u{1D49C}'.repeat(40)]: HEART.repeat(250) } })).toEqual([]);
    expect(textFieldProblems({ metadata: { ['\u{1D49C}'.repeat(41)]: 'v', k: HEART.repeat(251) } }).map(({ param }) => param)).toEqual(['metadata', 'metadata']);
  });

  it('finds U+0000 and lone surrogates, and leaves fields of other types to the envelope checks', () => {
    expect(textFieldProblems({ description: 'a\u0000b' })).toEqual([{ param: 'description', problem: 'description holds U+0000 or a lone surrogate' }]);
    expect(textFieldProblems({ order_id: '\ud800' })).toHaveLength(1);
    expect(textFieldProblems({ order_id: 7, description: null, metadata: [] })).toEqual([]);
    expect(textFieldProblems('not an object')).toEqual([]);
  });
});

describe('requestBodyOf', () => {
  it('reads the body as the server does, chunked framing undone', () => {
    const body = { ...TEMPLATE, description: `${HEART}${FAMILY}é` };
    expect(requestBodyOf(createBytes(body))).toEqual(body);
    expect(requestBodyOf(createBytes(body, 'k', true))).toEqual(body);
  });

  it('is undefined for bytes that are not UTF-8 JSON', () => {
    expect(requestBodyOf('POST /v1/payments HTTP/1.1\r\nContent-Length: 3\r\n\r\n{"a')).toBeUndefined();
    expect(requestBodyOf('POST /v1/payments HTTP/1.1\r\nContent-Length: 9\r\n\r\n{"a":"\xe9"}')).toBeUndefined();
    expect(requestBodyOf(`POST /v1/payments HTTP/1.1\r\nContent-Length: 4\r\n\r\n${Buffer.from('{}', 'utf16le').toString('latin1')}`)).toBeUndefined();
  });
});

describe('madePaymentProblems', () => {
  it('accepts a payment that shows the text fields as sent', () => {
    const body = { ...TEMPLATE, order_id: HEART.repeat(32), description: 'e\u0301', metadata: { [FAMILY]: '\u{1F600}' } };
    expect(madePaymentProblems(body, paymentOf(body))).toEqual([]);
  });

  it('finds a payment made from a field past its limit, and a field stored otherwise than sent', () => {
    const over = { ...TEMPLATE, order_id: HEART.repeat(33) };
    expect(madePaymentProblems(over, paymentOf(over))).toEqual([
      'a payment was made from a body whose order_id is 66 code points, not 1 to 64, not a 400 naming it',
    ]);
    const decomposed = { ...TEMPLATE, description: 'caf' + 'e\u0301' };
    expect(madePaymentProblems(decomposed, paymentOf({ ...decomposed, description: 'caf\u00e9' }))).toEqual([
      'the payment shows description "caf\\u{e9}" for "cafe\\u{301}" sent',
    ]);
    const metadata = { ...TEMPLATE, metadata: { k: HEART } };
    expect(madePaymentProblems(metadata, paymentOf({ ...metadata, metadata: { k: '\u2764' } }))).toHaveLength(1);
  });
});

describe('checkExchange on limit probes and made payments', () => {
  it('takes a 400 naming the field past its limit, and a 201 within it', () => {
    expect(contractFindings(createBytes({ ...TEMPLATE, order_id: HEART.repeat(33) }), answerOf(400, refusal('order_id')))).toEqual([]);
    expect(contractFindings(createBytes({ ...TEMPLATE, metadata: { k: HEART.repeat(251) } }), answerOf(400, refusal('metadata.k')))).toEqual([]);
    const within = { ...TEMPLATE, order_id: HEART.repeat(32) };
    expect(contractFindings(createBytes(within), answerOf(201, paymentOf(within)))).toEqual([]);
  });

  it('flags a 400 that names another field, a value within its limit refused, and a payment made past a limit', () => {
    expect(contractFindings(createBytes({ ...TEMPLATE, description: HEART.repeat(251) }), answerOf(400, refusal('amount')))).toEqual([
      'description is 502 code points, not 0 to 500: answered 400 "parameter_invalid" param "amount", not 400 parameter_invalid naming description',
    ]);
    expect(contractFindings(createBytes({ ...TEMPLATE, order_id: '\u{1F600}'.repeat(64) }), answerOf(400, refusal('order_id')))).toHaveLength(1);
    const over = { ...TEMPLATE, order_id: HEART.repeat(40) };
    expect(contractFindings(createBytes(over), answerOf(201, paymentOf(over)))).toEqual([
      'a payment was made from a body whose order_id is 80 code points, not 1 to 64, not a 400 naming it',
    ]);
  });

  it('counts a 500 on a limit probe as a server error, as every 500', () => {
    const request: ResolvedRequest = { bytes: createBytes({ ...TEMPLATE, order_id: HEART.repeat(33) }), credentials: new Set(['A']) };
    const { findings } = checkExchange('POST', request, { kind: 'answer', answer: answerOf(500, { error: { type: 'api_error', code: 'internal_error', message: 'm', request_id: 'r' } }), ms: 1 }, () => 'A');

    expect(findings).toEqual([{ kind: 'server_error', message: 'answered 500' }]);
  });

  it('asks nothing of a request that is no probe beyond its payment', () => {
    expect(contractFindings(createBytes({ ...TEMPLATE, description: HEART.repeat(251) }, 'fuzz-key-1'), answerOf(400, refusal('amount')))).toEqual([]);
  });
});
