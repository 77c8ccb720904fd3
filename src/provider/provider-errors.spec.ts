import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { RETRY_RULES, classifyError, classifyStatus, ruleFor } from './provider-errors';

function codeError(code: string, message = `${code} happened`): Error {
  return Object.assign(new Error(message), { code });
}

/** What undici's fetch throws for a transport failure. */
function fetchFailed(cause: unknown): TypeError {
  return new TypeError('fetch failed', { cause });
}

describe('retry table', () => {
  it('is the table of docs/retries.md, row for row', () => {
    const docs = readFileSync(resolve(__dirname, '../../docs/retries.md'), 'utf8');
    const rows = docs.matchAll(/^\| `([^`]+)` \| (transient|throttled|never) \|/gm);
    const documented = [...rows].map(([, failure, disposition]) => ({ failure, disposition }));
    expect(documented).toEqual(RETRY_RULES.map(({ failure, disposition }) => ({ failure, disposition })));
  });

  it('names each failure once', () => {
    const names = RETRY_RULES.map((r) => r.failure);
    expect(new Set(names).size).toBe(names.length);
  });

  it('honours Retry-After exactly on 429 and 503', () => {
    expect(RETRY_RULES.filter((r) => 'retryAfter' in r).map((r) => r.failure).sort()).toEqual(['HTTP 429', 'HTTP 503']);
  });
});

describe('classifyStatus', () => {
  it.each([500, 502, 503, 504])('%i is transient', (status) => {
    expect(classifyStatus(status).disposition).toBe('transient');
  });

  it('429 is throttled', () => {
    expect(classifyStatus(429).disposition).toBe('throttled');
  });

  it.each([501, 505, 400, 401, 403, 404, 409, 422, 301, 302])('%i is never retried', (status) => {
    expect(classifyStatus(status).disposition).toBe('never');
  });
});

describe('classifyError', () => {
  it.each(['ECONNREFUSED', 'ECONNRESET', 'UND_ERR_SOCKET', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT'])(
    '%s inside "fetch failed" is transient',
    (code) => {
      const { rule, reason } = classifyError(fetchFailed(codeError(code, `connect ${code} 127.0.0.1:9`)));
      expect(rule.failure).toBe(code);
      expect(rule.disposition).toBe('transient');
      expect(reason).toBe(`${code}: connect ${code} 127.0.0.1:9`);
    },
  );

  it('finds the code two causes deep (a body read that ends with "terminated")', () => {
    const error = new TypeError('terminated', { cause: codeError('UND_ERR_SOCKET', 'other side closed') });
    expect(classifyError(fetchFailed(error)).rule.failure).toBe('UND_ERR_SOCKET');
  });

  it('looks inside an AggregateError from a multi-address connect', () => {
    const error = new AggregateError([codeError('ECONNREFUSED'), codeError('ENETUNREACH')], 'connect failed');
    expect(classifyError(fetchFailed(error)).rule.failure).toBe('ECONNREFUSED');
  });

  it('does not retry an unrecognised error and describes the whole chain', () => {
    const { rule, reason } = classifyError(fetchFailed(codeError('ERR_SOMETHING_NEW', 'odd')));
    expect(rule).toBe(ruleFor('other error'));
    expect(rule.disposition).toBe('never');
    expect(reason).toBe('TypeError: fetch failed <- Error: odd');
  });

  it('never lets an error code select a named case', () => {
    expect(classifyError(codeError('timeout')).rule).toBe(ruleFor('other error'));
    expect(classifyError(codeError('HTTP 503')).rule).toBe(ruleFor('other error'));
  });

  it('survives a cause cycle', () => {
    const a: Error & { cause?: unknown } = new Error('a');
    a.cause = a;
    expect(classifyError(a).rule).toBe(ruleFor('other error'));
  });
});
