import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { Webhook } from 'standardwebhooks';
import type { EventResource } from '../src/merchant-events/event';
import { SecretBox } from '../src/common/secret-box';
import type { WorkerProcess } from './support/processes';
import { type Receipt, WebhookReceiver } from './support/webhook-receiver';
import { eventually } from './support/eventually';
import { PaymentsClient, useProcessStack } from './support/process-stack';
import { TEST_DATABASE_URL, createClient } from './support/test-env';

/**
 * Webhook endpoints a merchant manages itself, end to end: the API and the
 * worker as processes, endpoints on a loopback receiver, every delivery
 * verified with the standardwebhooks library as a merchant verifies it.
 */

jest.setTimeout(90_000);

const WEBHOOK_KNOBS = {
  WEBHOOK_DISPATCH_INTERVAL_MS: '100',
  WEBHOOK_TIMEOUT_MS: '2000',
  WEBHOOK_BACKOFF_BASE_MS: '100',
  WEBHOOK_BACKOFF_CAP_MS: '300',
  WEBHOOK_CONCURRENCY: '6',
  WEBHOOK_ENDPOINT_MAX_IN_FLIGHT: '2',
};

interface Answer {
  status: number;
  text: string;
  body: Record<string, unknown>;
  headers: Headers;
}

interface Merchant {
  id: string;
  apiKey: string;
  payments: PaymentsClient;
}

interface Endpoint {
  id: string;
  name: string;
  secret: string;
}

describe('webhook endpoints', () => {
  const stack = useProcessStack({ client: 'webhook endpoints' });
  let receiver: WebhookReceiver;
  let worker: WorkerProcess | undefined;

  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
  });
  afterEach(async () => {
    await worker?.stop();
    worker = undefined;
  });
  afterAll(() => receiver?.close());

  async function merchant(): Promise<Merchant> {
    const created = await createClient(stack.db, `endpoints ${randomUUID()}`);
    return { id: created.id, apiKey: created.apiKey, payments: new PaymentsClient(stack.api.url, created.apiKey) };
  }

  async function call(as: Merchant, method: string, path: string, body?: object, headers: Record<string, string> = {}): Promise<Answer> {
    const response = await fetch(`${stack.api.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${as.apiKey}`, ...(body && { 'content-type': 'application/json' }), ...headers },
      body: body && JSON.stringify(body),
    });
    const text = await response.text();
    return { status: response.status, text, body: text ? (JSON.parse(text) as Record<string, unknown>) : {}, headers: response.headers };
  }

  /** An endpoint on the receiver, made through the API; the receiver trusts the secret it was given. */
  async function endpoint(as: Merchant, body: object = {}): Promise<Endpoint> {
    const name = `endpoint-${randomUUID()}`;
    const created = await call(as, 'POST', '/v1/webhook_endpoints', { url: receiver.url(name), ...body });
    expect(created.status).toBe(201);
    const secret = created.body.secret as string;
    receiver.trust(name, secret);
    return { id: created.body.id as string, name, secret };
  }

  async function pay(as: Merchant, paymentMethod = 'pm_card_ok'): Promise<string> {
    const reply = await as.payments.post(randomUUID(), { amount: 700, currency: 'EUR', payment_method: paymentMethod });
    const id = reply.status === 402 ? (JSON.parse(reply.text) as { error: { payment: { id: string } } }).error.payment.id : reply.body.id;
    if (![201, 402].includes(reply.status) || !id) throw new Error(`payment answered ${reply.status}: ${reply.text}`);
    return id;
  }

  const paymentOf = (receipt: Receipt) => (JSON.parse(receipt.body) as EventResource).data.object.id;
  const accepted = (to: Endpoint) => receiver.receipts(to.name).filter((receipt) => receipt.answer === 204);

  function untilDelivered(to: Endpoint, paymentIds: string[]): Promise<Receipt[]> {
    return eventually(
      () => {
        const receipts = accepted(to);
        const got = new Set(receipts.map(paymentOf));
        return paymentIds.every((id) => got.has(id)) ? receipts : undefined;
      },
      { timeoutMs: 15_000, what: `${paymentIds.join(', ')} delivered to ${to.name}` },
    );
  }

  async function deliveryRows(paymentId: string): Promise<Map<string, { status: string; last_error: string | null }>> {
    const rows = (await stack.db.query(
      `SELECT d.endpoint_id, d.status, d.last_error FROM webhook_deliveries d JOIN events e ON e.client_id = d.client_id AND e.id = d.event_id
        WHERE e.payment_id = $1`,
      [paymentId],
    )) as { endpoint_id: string; status: string; last_error: string | null }[];
    return new Map(rows.map(({ endpoint_id, ...row }) => [endpoint_id, row]));
  }

  it('delivers each event to every enabled endpoint whose filter matches, each with its own delivery and retries', async () => {
    worker = await stack.startWorker(WEBHOOK_KNOBS);
    const shop = await merchant();
    const everything = await endpoint(shop);
    const failures = await endpoint(shop, { enabled_events: ['payment.failed'], description: 'declines only' });
    receiver.behave(failures.name, (attempt) => (attempt < 2 ? 503 : 204));

    const paid = await pay(shop);
    const declined = await pay(shop, 'pm_card_declined');

    await untilDelivered(everything, [paid, declined]);
    await untilDelivered(failures, [declined]);
    // At least once: a slow answer may bring an event twice, always under its one webhook-id.
    expect(new Set(receiver.receipts(everything.name).map((receipt) => `${receipt.webhookId} ${paymentOf(receipt)}`)).size).toBe(2);
    expect(new Set(receiver.receipts(failures.name).map(paymentOf))).toEqual(new Set([declined]));
    // Its own retries: the 503s at the failures endpoint cost the other endpoint nothing.
    expect(receiver.receipts(failures.name).map((receipt) => receipt.answer).slice(0, 3)).toEqual([503, 503, 204]);
    expect(receiver.receipts(everything.name).every((receipt) => receipt.answer === 204)).toBe(true);
    for (const [to, receipts] of [
      [everything, receiver.receipts(everything.name)],
      [failures, receiver.receipts(failures.name)],
    ] as const) {
      for (const receipt of receipts) expect(new Webhook(to.secret).verify(receipt.body, receipt.headers)).toEqual(JSON.parse(receipt.body));
    }
    expect([...(await deliveryRows(declined)).keys()].sort()).toEqual([everything.id, failures.id].sort());
    expect([...(await deliveryRows(paid)).keys()]).toEqual([everything.id]);
    expect(receiver.receipts(everything.name).find((receipt) => paymentOf(receipt) === declined)?.webhookId).toBe(
      receiver.receipts(failures.name)[0].webhookId,
    );
  });

  it('stops the pending deliveries of a disabled or deleted endpoint and no other’s, and sends them nothing new', async () => {
    worker = await stack.startWorker(WEBHOOK_KNOBS);
    const shop = await merchant();
    const kept = await endpoint(shop);
    const disabled = await endpoint(shop);
    const deleted = await endpoint(shop);
    receiver.behave(disabled.name, () => 503);
    receiver.behave(deleted.name, () => 503);

    const first = await pay(shop);
    await untilDelivered(kept, [first]);
    await eventually(() => (receiver.receipts(disabled.name).length >= 2 && receiver.receipts(deleted.name).length >= 2) || undefined, {
      what: 'both failing endpoints retrying',
    });

    const disabling = await call(shop, 'POST', `/v1/webhook_endpoints/${disabled.id}`, { disabled: true });
    expect(disabling.status).toBe(200);
    expect(disabling.body).toMatchObject({ id: disabled.id, object: 'webhook_endpoint', status: 'disabled' });
    expect(disabling.body.secret).toBeUndefined();
    const deleting = await call(shop, 'DELETE', `/v1/webhook_endpoints/${deleted.id}`);
    expect(deleting).toMatchObject({ status: 200, body: { id: deleted.id, object: 'webhook_endpoint', deleted: true } });

    const rows = await deliveryRows(first);
    expect(rows.get(kept.id)?.status).toBe('delivered');
    expect(rows.get(disabled.id)).toEqual({ status: 'failed', last_error: 'endpoint disabled' });
    expect(rows.get(deleted.id)).toEqual({ status: 'failed', last_error: 'endpoint deleted' });

    const second = await pay(shop);
    await untilDelivered(kept, [second]);
    expect([...(await deliveryRows(second)).keys()]).toEqual([kept.id]);
    for (const stopped of [disabled, deleted]) expect(receiver.receipts(stopped.name).map(paymentOf)).not.toContain(second);
    expect(await call(shop, 'GET', `/v1/webhook_endpoints/${deleted.id}`)).toMatchObject({ status: 404, body: { error: { code: 'resource_missing' } } });
    const listed = await call(shop, 'GET', '/v1/webhook_endpoints');
    expect(listed.body).toMatchObject({ object: 'list', has_more: false });
    expect((listed.body.data as { id: string; status: string }[]).map(({ id, status }) => [id, status])).toEqual(
      [
        [kept.id, 'enabled'],
        [disabled.id, 'disabled'],
      ].sort((a, b) => (a[0] < b[0] ? 1 : -1)),
    );
  });

  it('signs with both secrets after rotate_secret until the old one expires, then with the new one only; the database holds only ciphertext', async () => {
    worker = await stack.startWorker(WEBHOOK_KNOBS);
    const shop = await merchant();
    const hooks = await endpoint(shop);

    const rotated = await call(shop, 'POST', `/v1/webhook_endpoints/${hooks.id}/rotate_secret`, { expires_in_hours: 1 });
    expect(rotated.status).toBe(200);
    const next = rotated.body.secret as string;
    expect(next).toMatch(/^whsec_/);
    expect(next).not.toBe(hooks.secret);

    const during = await pay(shop);
    const [both] = await untilDelivered(hooks, [during]);
    expect(both.headers['webhook-signature'].split(' ')).toHaveLength(2);
    expect(new Webhook(hooks.secret).verify(both.body, both.headers)).toEqual(JSON.parse(both.body));
    expect(new Webhook(next).verify(both.body, both.headers)).toEqual(JSON.parse(both.body));

    const [row] = (await stack.db.query(`SELECT to_jsonb(w)::text AS whole FROM webhook_endpoints w WHERE id = $1`, [hooks.id])) as {
      whole: string;
    }[];
    for (const secret of [hooks.secret, next]) expect(row.whole).not.toContain(secret.slice('whsec_'.length));

    // The hour passes.
    await stack.db.query(`UPDATE webhook_endpoints SET previous_secret_expires_at = now() - interval '1 second' WHERE id = $1`, [hooks.id]);
    const after = await pay(shop);
    const onlyNew = (await untilDelivered(hooks, [after])).find((receipt) => paymentOf(receipt) === after)!;
    expect(onlyNew.headers['webhook-signature'].split(' ')).toHaveLength(1);
    expect(new Webhook(next).verify(onlyNew.body, onlyNew.headers)).toEqual(JSON.parse(onlyNew.body));
    expect(() => new Webhook(hooks.secret).verify(onlyNew.body, onlyNew.headers)).toThrow();
  });

  it('answers 404 for another client’s endpoint on every route, and changes nothing of it', async () => {
    const owner = await merchant();
    const stranger = await merchant();
    const owned = await endpoint(owner);

    for (const [method, path, body] of [
      ['GET', `/v1/webhook_endpoints/${owned.id}`, undefined],
      ['POST', `/v1/webhook_endpoints/${owned.id}`, { disabled: true }],
      ['POST', `/v1/webhook_endpoints/${owned.id}/rotate_secret`, {}],
      ['DELETE', `/v1/webhook_endpoints/${owned.id}`, undefined],
    ] as const) {
      const answer = await call(stranger, method, path, body);
      expect([method, path, answer.status, answer.body]).toEqual([method, path, 404, { error: expect.objectContaining({ code: 'resource_missing' }) }]);
    }
    expect((await call(stranger, 'GET', '/v1/webhook_endpoints')).body).toEqual({ object: 'list', data: [], has_more: false });
    const still = await call(owner, 'GET', `/v1/webhook_endpoints/${owned.id}`);
    expect(still).toMatchObject({ status: 200, body: { id: owned.id, status: 'enabled' } });
    const [row] = (await stack.db.query(`SELECT previous_secret_ciphertext FROM webhook_endpoints WHERE id = $1`, [owned.id])) as {
      previous_secret_ciphertext: string | null;
    }[];
    expect(row.previous_secret_ciphertext).toBeNull();
  });

  it('replays a keyed creation byte for byte, refuses the key for another request, and stores the answer’s secret sealed', async () => {
    const shop = await merchant();
    const key = randomUUID();
    const body = { url: receiver.url('idempotent'), enabled_events: ['refund.succeeded'] };

    const first = await call(shop, 'POST', '/v1/webhook_endpoints', body, { 'idempotency-key': key });
    const again = await call(shop, 'POST', '/v1/webhook_endpoints', body, { 'idempotency-key': key });
    const other = await call(shop, 'POST', '/v1/webhook_endpoints', { ...body, description: 'x' }, { 'idempotency-key': key });
    const asPayment = await shop.payments.post(key, { amount: 700, currency: 'EUR', payment_method: 'pm_card_ok' });

    expect(first.status).toBe(201);
    expect(again.status).toBe(201);
    expect(again.text).toBe(first.text);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    expect(other).toMatchObject({ status: 422, body: { error: { code: 'idempotency_key_reused' } } });
    expect(asPayment.status).toBe(422);
    expect(((await call(shop, 'GET', '/v1/webhook_endpoints')).body.data as unknown[]).length).toBe(1);
    const [stored] = (await stack.db.query(`SELECT response_body FROM idempotency_keys WHERE client_id = $1 AND key = $2`, [shop.id, key])) as {
      response_body: string;
    }[];
    expect(stored.response_body).not.toContain((first.body.secret as string).slice('whsec_'.length));
  });

  it('refuses bad input in the envelope and writes nothing; a seventeenth endpoint is refused', async () => {
    const shop = await merchant();
    for (const body of [
      {},
      { url: 'ftp://shop.example/hooks' },
      { url: 'https://user:password@shop.example/hooks' },
      { url: 'https://shop.example/hooks', enabled_events: [] },
      { url: 'https://shop.example/hooks', enabled_events: ['payment.captured'] },
      { url: 'https://shop.example/hooks', extra: true },
    ]) {
      const refused = await call(shop, 'POST', '/v1/webhook_endpoints', body);
      expect([body, refused.status, (refused.body.error as { type: string }).type]).toEqual([body, 400, 'invalid_request_error']);
    }
    const hooks = await endpoint(shop);
    expect(await call(shop, 'POST', `/v1/webhook_endpoints/${hooks.id}/rotate_secret`, { expires_in_hours: 169 })).toMatchObject({
      status: 400,
      body: { error: { code: 'parameter_invalid' } },
    });
    expect(await call(shop, 'POST', `/v1/webhook_endpoints/${hooks.id}`, { url: 'http://u:p@127.0.0.1/x' })).toMatchObject({
      status: 400,
      body: { error: { code: 'parameter_invalid', param: 'url' } },
    });
    for (let i = 1; i < 16; i++) await endpoint(shop);
    expect(await call(shop, 'POST', '/v1/webhook_endpoints', { url: receiver.url('one-too-many') })).toMatchObject({
      status: 400,
      body: { error: { code: 'webhook_endpoint_limit_reached' } },
    });
    const [count] = (await stack.db.query(`SELECT count(*)::int AS n FROM webhook_endpoints WHERE client_id = $1`, [shop.id])) as { n: number }[];
    expect(count.n).toBe(16);
  });

  it('refuses, with the production default, URLs that name or resolve to internal addresses, on creation and on update', async () => {
    const shop = await merchant();
    const hooks = await endpoint(shop);
    const strict = await stack.startApi({ WEBHOOK_ALLOW_PRIVATE_URLS: 'false' });
    try {
      const send = async (method: string, path: string, body: object) => {
        const response = await fetch(`${strict.url}${path}`, {
          method,
          headers: { authorization: `Bearer ${shop.apiKey}`, 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
        return { status: response.status, body: (await response.json()) as { error: { code: string; param?: string } } };
      };
      for (const url of ['http://127.0.0.1:9/hooks', 'http://169.254.169.254/latest', 'http://[::ffff:10.0.0.1]/hooks', 'http://localhost/hooks']) {
        for (const [method, path] of [
          ['POST', '/v1/webhook_endpoints'],
          ['POST', `/v1/webhook_endpoints/${hooks.id}`],
        ]) {
          const refused = await send(method, path, { url });
          expect([url, path, refused.status, refused.body.error.code, refused.body.error.param]).toEqual([url, path, 400, 'parameter_invalid', 'url']);
        }
      }
      expect((await call(shop, 'GET', `/v1/webhook_endpoints/${hooks.id}`)).body.url).toBe(receiver.url(hooks.name));
      expect(((await call(shop, 'GET', '/v1/webhook_endpoints')).body.data as unknown[]).length).toBe(1);
    } finally {
      await strict.stop();
    }
  });

  it('webhook:redeliver sends a failed delivery again under the same webhook-id', async () => {
    worker = await stack.startWorker({ ...WEBHOOK_KNOBS, WEBHOOK_RETRY_HORIZON_HOURS: '0.0003' });
    const shop = await merchant();
    const hooks = await endpoint(shop);
    receiver.behave(hooks.name, () => 500);
    const paid = await pay(shop);
    await eventually(async () => ((await deliveryRows(paid)).get(hooks.id)?.status === 'failed' ? true : undefined), {
      what: 'the delivery failed for good',
    });
    const [failed] = receiver.receipts(hooks.name);
    receiver.behave(hooks.name, () => 204);

    const redeliver = (...args: string[]) =>
      spawnSync(process.execPath, [join(__dirname, '..', 'dist', 'src', 'operator', 'webhook-redeliver.js'), ...args], {
        env: { ...process.env, DATABASE_URL: TEST_DATABASE_URL, LOG_LEVEL: 'silent' },
        encoding: 'utf8',
        timeout: 20_000,
      });
    const done = redeliver('--event', failed.webhookId, '--endpoint', hooks.id);

    expect(done.status).toBe(0);
    expect(JSON.parse(done.stdout)).toEqual({
      msg: 'redelivering',
      event: failed.webhookId,
      client: shop.id,
      deliveries: [{ endpointId: hooks.id, previousStatus: 'failed' }],
    });
    const [again] = await untilDelivered(hooks, [paid]);
    expect(again.webhookId).toBe(failed.webhookId);
    expect(new Webhook(hooks.secret).verify(again.body, again.headers)).toEqual(JSON.parse(again.body));
    const unknown = redeliver('--event', `evt_${'0'.repeat(26)}`);
    expect(unknown.status).toBe(1);
    expect(JSON.parse(unknown.stderr)).toMatchObject({ msg: 'nothing redelivered', error: 'no such event' });
    expect(redeliver('--event', 'nope').status).toBe(2);
  });

  it('client:create --webhook-url makes the first endpoint; secrets:reencrypt seals every secret again under a new key', async () => {
    const tool = (script: string, args: string[], env: Record<string, string> = {}) =>
      spawnSync(process.execPath, [join(__dirname, '..', 'dist', 'src', script), ...args], {
        env: { ...process.env, DATABASE_URL: TEST_DATABASE_URL, LOG_LEVEL: 'silent', ...env },
        encoding: 'utf8',
        timeout: 20_000,
      });
    const created = tool('clients/client-create.js', ['--name', 'cli shop', '--webhook-url', receiver.url('cli')]);
    expect(created.status).toBe(0);
    const client = JSON.parse(created.stdout) as { api_key: string; webhook_endpoint: string; webhook_secret: string };
    const listed = await fetch(`${stack.api.url}/v1/webhook_endpoints`, { headers: { authorization: `Bearer ${client.api_key}` } });
    expect(await listed.json()).toMatchObject({
      data: [{ id: client.webhook_endpoint, url: receiver.url('cli'), enabled_events: ['*'], status: 'enabled' }],
    });

    const newKey = SecretBox.newKey();
    const rotation = { SECRETS_KEY: newKey, SECRETS_KEY_PREVIOUS: process.env.SECRETS_KEY! };
    const first = tool('operator/secrets-reencrypt.js', [], rotation);
    expect(first.status).toBe(0);
    expect(JSON.parse(first.stdout)).toMatchObject({ msg: 'secrets re-encrypted', raced: 0 });
    expect(JSON.parse(first.stdout).resealed).toBeGreaterThanOrEqual(1);
    expect(JSON.parse(tool('operator/secrets-reencrypt.js', [], rotation).stdout)).toMatchObject({ resealed: 0 });
    const [row] = (await stack.db.query(`SELECT secret_ciphertext FROM webhook_endpoints WHERE id = $1`, [client.webhook_endpoint])) as {
      secret_ciphertext: string;
    }[];
    expect(new SecretBox({ key: newKey }).open(row.secret_ciphertext)).toBe(client.webhook_secret);
    // Put back under the suite's key, for the processes of the tests that follow.
    expect(tool('operator/secrets-reencrypt.js', [], { SECRETS_KEY: process.env.SECRETS_KEY!, SECRETS_KEY_PREVIOUS: newKey }).status).toBe(0);
  });
});
