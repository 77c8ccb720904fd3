import { QueryFailedError } from 'typeorm';
import { errorForLog, redactSecrets, requestForLog } from './log-safety';

const KEY = 'sk_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_abcd';

describe('log safety', () => {
  it('removes API keys and webhook secrets wherever they are in a string', () => {
    expect(redactSecrets(`/v1/payments?api_key=${KEY}&x=1`)).toBe('/v1/payments?api_key=[redacted]&x=1');
    expect(redactSecrets('whsec_3fulLzZy+ihVtzUO9c06pgtiuqco2ZNO in a message')).toBe('[redacted] in a message');
    expect(redactSecrets('sk_ alone, or a risk_factor')).toBe('sk_ alone, or a risk_factor');
  });

  it('removes the user name and password of any URL in a string, up to its last @ before the path', () => {
    expect(redactSecrets('Request cannot be constructed from a URL that includes credentials: http://u:hunter2@merchant.example/hook')).toBe(
      'Request cannot be constructed from a URL that includes credentials: http://[redacted]@merchant.example/hook',
    );
    expect(redactSecrets('https://user:p@ss@host:8443/a@b and postgres://app:pw@db/payments')).toBe(
      'https://[redacted]@host:8443/a@b and postgres://[redacted]@db/payments',
    );
    expect(redactSecrets('https://merchant.example/hook?to=a@b.example')).toBe('https://merchant.example/hook?to=a@b.example');
  });

  it('logs a database error as its SQLSTATE and constraint, never the statement or its parameters', () => {
    const error = new QueryFailedError(
      'INSERT INTO payments (description) VALUES ($1)',
      ['my card number is 4242'],
      Object.assign(new Error('invalid byte sequence for encoding "UTF8": 0x00'), {
        code: '22021',
        constraint: undefined,
        table: 'payments',
      }),
    );

    const logged = JSON.stringify(errorForLog(error));

    expect(JSON.parse(logged)).toEqual({ type: 'QueryFailedError', code: '22021', table: 'payments' });
    expect(logged).not.toContain('4242');
    expect(logged).not.toContain('INSERT');
  });

  it('logs any other error as its class and a redacted message, without a stack', () => {
    expect(errorForLog(new TypeError(`bad key ${KEY}`))).toEqual({
      type: 'TypeError',
      code: undefined,
      message: 'bad key [redacted]',
    });
  });

  it('logs a request without credential headers or keys in its URL', () => {
    const logged = requestForLog({
      id: 'req_1',
      method: 'GET',
      url: `/v1/payments?api_key=${KEY}`,
      headers: { authorization: `Bearer ${KEY}`, 'x-api-key': 'anything', 'user-agent': `curl ${KEY}` },
    });

    expect(JSON.stringify(logged)).not.toContain(KEY);
    expect(logged).toEqual({
      id: 'req_1',
      clientRequestId: undefined,
      method: 'GET',
      url: '/v1/payments?api_key=[redacted]',
      headers: { authorization: '[redacted]', 'x-api-key': '[redacted]', 'user-agent': 'curl [redacted]' },
    });
  });

  it("logs the client's X-Request-Id as a field of its own: redacted, printable and at most 128 characters", () => {
    const request = (value: string) => requestForLog({ id: 'req_ours', headers: { 'x-request-id': value } });

    expect(request('abc-123')).toMatchObject({ id: 'req_ours', clientRequestId: 'abc-123', headers: {} });
    expect(request('a\nfake log line\u001b[31m').clientRequestId).toBe('a?fake log line?[31m');
    expect(request(`${KEY} ${'x'.repeat(200)}`).clientRequestId).toBe(`[redacted] ${'x'.repeat(117)}`);
  });
});
