import type { IncomingMessage } from 'node:http';
import typeis from 'type-is';
import { jsonBodyChecker } from './json-body-reader';

function requestWith(headers: Record<string, string>): IncomingMessage {
  return { headers } as IncomingMessage;
}

const CONTENT_TYPES = [
  'application/json',
  'application/json; charset=utf-8',
  'APPLICATION/JSON;CHARSET=UTF-8',
  'application/json ; charset="utf-8"',
  'application/json; charset=latin1',
  'application/problem+json',
  'application/jsonx',
  'text/json',
  'text/plain',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x',
  '*/*',
  'application/*',
  'json',
  '',
  ';',
  'application/json;',
  'application/json; =x',
];

describe('jsonBodyChecker', () => {
  it.each(CONTENT_TYPES)('gives type-is its own verdict for %j, asked once and again', (contentType) => {
    const check = jsonBodyChecker();
    const request = requestWith({ 'content-type': contentType, 'content-length': '2' });
    const expected = Boolean(typeis(request, ['application/json']));

    expect(check(request)).toBe(expected);
    expect(check(request)).toBe(expected);
  });

  it('reads no body a request does not have, whatever its type', () => {
    const check = jsonBodyChecker();

    expect(check(requestWith({ 'content-type': 'application/json' }))).toBe(false);
    expect(check(requestWith({ 'content-type': 'application/json', 'transfer-encoding': 'chunked' }))).toBe(true);
  });

  it('reads no body without a Content-Type', () => {
    expect(jsonBodyChecker()(requestWith({ 'content-length': '2' }))).toBe(false);
  });

  it('judges every value still once more values were sent than it keeps', () => {
    const check = jsonBodyChecker();
    for (let i = 0; i < 200; i++) {
      expect(check(requestWith({ 'content-type': `application/x-${i}`, 'content-length': '2' }))).toBe(false);
    }

    expect(check(requestWith({ 'content-type': 'application/json; charset=utf-8', 'content-length': '2' }))).toBe(true);
    expect(check(requestWith({ 'content-type': 'text/plain', 'content-length': '2' }))).toBe(false);
  });
});
