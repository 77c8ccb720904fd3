import { parseAnswer } from './http';
import { envelopeProblems } from './properties';

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
