import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { type Server, createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { eventually } from './support/eventually';
import { PaymentsClient, useProcessStack } from './support/process-stack';
import type { WorkerProcess } from './support/processes';
import { createClient } from './support/test-env';

/**
 * Webhook URLs cannot make the worker reach what only the deployment can:
 * client:create refuses them, and the worker, as a process with the
 * production default (WEBHOOK_ALLOW_PRIVATE_URLS=false), refuses again when
 * it connects. The name rebinding between the two is shown with a resolver
 * hook in src/merchant-events/webhook-dispatcher.service.spec.ts.
 */

jest.setTimeout(60_000);

const CLIENT_CREATE = join(__dirname, '..', 'dist', 'src', 'clients', 'client-create.js');
const PASSWORD = 'hunter2-not-to-be-seen';

function clientCreate(webhookUrl: string, allowPrivate: boolean) {
  return spawnSync(process.execPath, [CLIENT_CREATE, '--name', 'ssrf probe', '--webhook-url', webhookUrl], {
    env: { ...process.env, LOG_LEVEL: 'silent', WEBHOOK_ALLOW_PRIVATE_URLS: String(allowPrivate) },
    encoding: 'utf8',
    timeout: 20_000,
  });
}

describe('webhook URLs: no request forgery', () => {
  const stack = useProcessStack({ client: 'webhook url policy' });
  /** Loopback, where a forged request would land: it counts every connection. */
  let listener: Server;
  let port: number;
  let connections = 0;
  let worker: WorkerProcess | undefined;

  beforeAll(async () => {
    listener = createServer((socket) => {
      connections++;
      socket.end('HTTP/1.1 204 No Content\r\n\r\n');
    });
    await new Promise<void>((listening) => listener.listen(0, '127.0.0.1', listening));
    port = (listener.address() as AddressInfo).port;
  });
  afterEach(async () => {
    await worker?.stop();
    worker = undefined;
  });
  afterAll(() => new Promise((closed) => listener.close(closed)));

  const clientCount = async () => Number((await stack.db.query(`SELECT count(*) AS n FROM api_clients`))[0].n);

  it.each([
    [`http://merchant:${PASSWORD}@merchant.example/hooks`, true, 'url must not carry a user name or password'],
    [`https://merchant:${PASSWORD}@merchant.example/hooks`, false, 'url must not carry a user name or password'],
    ['http://127.0.0.1/hooks', false, 'url names 127.0.0.1, which is loopback: webhooks go to public addresses only.'],
    ['http://2130706433/hooks', false, 'url names 127.0.0.1, which is loopback: webhooks go to public addresses only.'],
    ['http://0x7f.1/hooks', false, 'url names 127.0.0.1, which is loopback: webhooks go to public addresses only.'],
    ['http://[::ffff:127.0.0.1]/hooks', false, 'url names ::ffff:7f00:1, which is loopback: webhooks go to public addresses only.'],
    ['http://169.254.169.254/latest/meta-data/', false, 'url names 169.254.169.254, which is link-local: webhooks go to public addresses only.'],
    ['http://10.0.0.5/hooks', false, 'url names 10.0.0.5, which is private: webhooks go to public addresses only.'],
    ['http://localhost/hooks', false, "url's host localhost resolves to "],
  ])('client:create refuses %s (allow private: %s) with one line and exit 2, and writes nothing', async (url, allowPrivate, reason) => {
    const before = await clientCount();

    const run = clientCreate(url, allowPrivate);

    expect({ status: run.status, stdout: run.stdout }).toEqual({ status: 2, stdout: '' });
    expect(run.stderr).toMatch(/^client:create: --webhook-url refused: .*\n$/);
    expect(run.stderr).toContain(reason);
    expect(run.stderr).not.toContain(PASSWORD);
    expect(await clientCount()).toBe(before);
  });

  it('client:create takes a loopback URL when WEBHOOK_ALLOW_PRIVATE_URLS=true (local demos and tests)', async () => {
    const run = clientCreate(`http://127.0.0.1:${port}/hooks`, true);

    expect(run.status).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({ webhook_url: `http://127.0.0.1:${port}/hooks` });
  });

  it('a worker refuses, when it connects, a name that resolves to loopback and a stored URL with credentials: nothing connects, last_error says why, no log line holds the password', async () => {
    worker = await stack.startWorker({
      WEBHOOK_ALLOW_PRIVATE_URLS: 'false',
      LOG_LEVEL: 'info',
      WEBHOOK_DISPATCH_INTERVAL_MS: '100',
      WEBHOOK_BACKOFF_BASE_MS: '100',
      WEBHOOK_BACKOFF_CAP_MS: '300',
    });
    // Stored as if each had passed registration: a name that resolved elsewhere then, a URL from before these rules.
    const named = await createClient(stack.db, 'named', { webhookUrl: `http://localhost:${port}/hooks` });
    const withCredentials = await createClient(stack.db, 'credentials', { webhookUrl: `http://127.0.0.1:${port}/hooks` });
    // A URL stored before the rules: registration now refuses credentials, the worker must too.
    await stack.db.query(`UPDATE webhook_endpoints SET url = $2 WHERE client_id = $1`, [
      withCredentials.id,
      `http://merchant:${PASSWORD}@127.0.0.1:${port}/hooks`,
    ]);
    for (const { apiKey } of [named, withCredentials]) {
      const reply = await new PaymentsClient(stack.api.url, apiKey).post(randomUUID(), { amount: 500, currency: 'EUR', payment_method: 'pm_card_ok' });
      expect(reply.status).toBe(201);
    }

    const lastErrorOf = (clientId: string) =>
      eventually(
        async () => {
          const [row] = await stack.db.query(`SELECT attempts, last_error FROM webhook_deliveries WHERE client_id = $1`, [clientId]);
          return row?.attempts >= 2 ? (row.last_error as string) : undefined;
        },
        { what: `two failed attempts for ${clientId}` },
      );

    expect(await lastErrorOf(named.id)).toMatch(/^address (127\.0\.0\.1|::1) is loopback: refused$/);
    expect(await lastErrorOf(withCredentials.id)).toBe('URL carries credentials: refused');
    expect(connections).toBe(0);
    await worker.waitForLine(({ json }) => json?.failure === 'URL carries credentials: refused');
    expect(worker.output().filter((line) => line.includes(PASSWORD))).toEqual([]);
  });
});
