import { randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { PaymentsClient, WebhookVerificationError, verifyWebhook } from '../src/index.js';
import { payment } from './fake-api.js';

/**
 * webhooks.verify against deliveries signed by the service's own signer (the
 * `standardwebhooks` package, as src/common/signed-webhook.ts uses it), so
 * the client verifies what the API actually sends.
 */

const secret = () => `whsec_${randomBytes(24).toString('base64')}`;
const NOW = Date.parse('2026-03-01T12:00:00.000Z');
const EVENT = { id: 'evt_01JDQ2ZC4R5S8V9W0X1Y2Z3A4D', object: 'event', type: 'payment.succeeded', created_at: '2026-03-01T12:00:00.000Z', data: { object: payment() } };
const BODY = JSON.stringify(EVENT);

/** The headers the API's dispatcher sends for `body`, signed with `key` at `at`. */
function delivery(key: string, body = BODY, at = NOW): Record<string, string> {
  return {
    'content-type': 'application/json',
    'webhook-id': EVENT.id,
    'webhook-timestamp': String(Math.floor(at / 1000)),
    'webhook-signature': new Webhook(key).sign(EVENT.id, new Date(at), body),
  };
}

const api = new PaymentsClient({ baseUrl: 'http://api.test', apiKey: 'sk_test' });
const now = () => NOW;

describe('webhooks.verify', () => {
  it('returns the event of a delivery signed with the secret, from a string or the raw bytes', () => {
    const key = secret();
    const headers = delivery(key);

    expect(api.webhooks.verify(BODY, headers, key, { now })).toEqual(EVENT);
    expect(api.webhooks.verify(Buffer.from(BODY), headers, key, { now })).toEqual(EVENT);
  });

  it('reads a fetch Headers as well as Node’s header object, whatever the case of the names', () => {
    const key = secret();
    const upper = Object.fromEntries(Object.entries(delivery(key)).map(([name, value]) => [name.toUpperCase(), value]));

    expect(api.webhooks.verify(BODY, new Headers(delivery(key)), key, { now })).toEqual(EVENT);
    expect(api.webhooks.verify(BODY, upper, key, { now })).toEqual(EVENT);
  });

  it('accepts any one of several signatures: a secret being rotated', () => {
    const [old, current] = [secret(), secret()];
    const both = `${delivery(old)['webhook-signature']} ${delivery(current)['webhook-signature']}`;
    const headers = { ...delivery(current), 'webhook-signature': both };

    expect(api.webhooks.verify(BODY, headers, old, { now })).toEqual(EVENT);
    expect(api.webhooks.verify(BODY, headers, current, { now })).toEqual(EVENT);
    expect(() => api.webhooks.verify(BODY, headers, secret(), { now })).toThrow(WebhookVerificationError);
  });

  it('ignores signatures of other schemes (v1a) and malformed entries', () => {
    const key = secret();
    const good = delivery(key)['webhook-signature'];
    const headers = { ...delivery(key), 'webhook-signature': `v1a,${good.slice(3)} garbage v1, ${good}` };

    expect(api.webhooks.verify(BODY, headers, key, { now })).toEqual(EVENT);
    expect(() => api.webhooks.verify(BODY, { ...headers, 'webhook-signature': `v1a,${good.slice(3)}` }, key, { now })).toThrow(
      /no webhook-signature matches/,
    );
  });

  it.each([
    ['a body changed by one character', (key: string) => [BODY.replace('500', '501'), delivery(key)]],
    ['a body parsed and serialised again', (key: string) => [JSON.stringify(JSON.parse(BODY), null, 1), delivery(key)]],
    ['another id', (key: string) => [BODY, { ...delivery(key), 'webhook-id': 'evt_other' }]],
    ['another timestamp', (key: string) => [BODY, { ...delivery(key), 'webhook-timestamp': String(NOW / 1000 + 1) }]],
    ['another secret', () => [BODY, delivery(secret())]],
  ] as [string, (key: string) => [string, Record<string, string>]][])('refuses %s', (_case, make) => {
    const key = secret();
    const [body, headers] = make(key);

    expect(() => api.webhooks.verify(body, headers, key, { now })).toThrow(WebhookVerificationError);
  });

  it('refuses a timestamp more than five minutes from now by default, either way', () => {
    const key = secret();
    const at = (offsetS: number) => delivery(key, BODY, NOW + offsetS * 1000);

    expect(api.webhooks.verify(BODY, at(-300), key, { now })).toEqual(EVENT);
    expect(api.webhooks.verify(BODY, at(300), key, { now })).toEqual(EVENT);
    expect(() => api.webhooks.verify(BODY, at(-301), key, { now })).toThrow(/301 s old, past the tolerance of 300 s/);
    expect(() => api.webhooks.verify(BODY, at(301), key, { now })).toThrow(/301 s ahead/);
  });

  it('takes another tolerance, and the real clock by default', () => {
    const key = secret();

    expect(() => api.webhooks.verify(BODY, delivery(key, BODY, NOW - 61_000), key, { now, toleranceSeconds: 60 })).toThrow(/stale|old/);
    expect(api.webhooks.verify(BODY, delivery(key, BODY, Date.now()), key)).toEqual(EVENT);
    expect(() => api.webhooks.verify(BODY, delivery(key, BODY, NOW), key)).toThrow(WebhookVerificationError);
  });

  it.each(['webhook-id', 'webhook-timestamp', 'webhook-signature'])('refuses a delivery without %s', (name) => {
    const key = secret();
    const headers: Record<string, string | undefined> = { ...delivery(key), [name]: undefined };

    expect(() => api.webhooks.verify(BODY, headers, key, { now })).toThrow(`${name} header missing`);
  });

  it('refuses a header given twice, and a timestamp that is not seconds', () => {
    const key = secret();
    const headers = delivery(key);

    expect(() => api.webhooks.verify(BODY, { ...headers, 'webhook-id': [EVENT.id, 'evt_2'] }, key, { now })).toThrow(/given 2 times/);
    expect(() => api.webhooks.verify(BODY, { ...headers, 'webhook-timestamp': '2026-03-01T12:00:00Z' }, key, { now })).toThrow(
      /not a number of seconds/,
    );
  });

  it('refuses a signed body that is not an event', () => {
    const key = secret();
    const body = JSON.stringify({ hello: 'world' });

    expect(() => api.webhooks.verify(body, delivery(key, body), key, { now })).toThrow(/not an event/);
  });

  it('is also verifyWebhook, for code that has no client instance', () => {
    const key = secret();

    expect(verifyWebhook(BODY, delivery(key), key, { now })).toEqual(EVENT);
  });
});
