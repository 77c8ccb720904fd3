import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { ApiKeysService } from '../src/clients/api-keys.service';
import { ClientsRepository } from '../src/clients/clients.repository';
import { freePort } from './support/private-redis';
import type { ApiProcess, WorkerProcess } from './support/processes';
import { ProcessStack } from './support/process-stack';
import { TEST_DATABASE_URL } from './support/test-env';

jest.setTimeout(60_000);

/** Every scenario the demo narrates, in order, by the heading it prints. */
const STEPS = [
  'First attempt',
  'A lost provider reply, and the retry',
  'The same key with a different body',
  '20 concurrent retries on one key',
  'A decline, replayed byte for byte',
  'A refund, and one too many',
  "A pending payment settled by the provider's event",
  'A crash mid-payment, finished by the worker',
  'Merchant events',
  'The API key rolled, then the old one revoked',
  'Webhook endpoints, managed by the merchant',
  'The ledger audit',
];

/**
 * Long enough for the provider's event to settle the pending payment first
 * (the demo tells the two apart by it), short enough for the crash step.
 */
const STALE_AFTER_MS = '3000';

/**
 * `npm run demo` against a running stack: the API, the worker and the
 * provider as processes, the provider's events going to the API, and the
 * demo's webhook endpoint on loopback, where this worker can reach it.
 */
describe('npm run demo', () => {
  let stack: ProcessStack;
  let api: ApiProcess;
  let worker: WorkerProcess;

  beforeAll(async () => {
    // The provider must know where the API's events route is before the API starts.
    const apiPort = await freePort();
    stack = new ProcessStack({
      client: 'demo',
      apis: 0,
      providerEnv: {
        PROVIDER_WEBHOOK_URL: `http://127.0.0.1:${apiPort}/v1/provider/events`,
        PROVIDER_PENDING_SETTLE_MS: '500',
      },
    });
    await stack.start();
    // Empty tables: the audit at the end reads the whole database against this provider's ledger.
    await stack.reset();
    [api, worker] = await Promise.all([stack.startApi({ PORT: String(apiPort) }), stack.startWorker({ RECONCILE_STALE_AFTER_MS: STALE_AFTER_MS })]);
  });

  afterAll(async () => {
    await Promise.all([api?.stop(), worker?.stop()]);
    await stack?.stop();
  });

  it('walks through every scenario against the running stack, each step as narrated, and exits 0', async () => {
    const { code, stdout, stderr } = await runDemo(['--api', api.url, '--provider', stack.provider.url, '--webhooks'], {
      DATABASE_URL: TEST_DATABASE_URL,
      QUEUE_PREFIX: stack.queuePrefix,
      // The audit's and the crash step's view of the worker's schedule: the one the stack's worker runs.
      RECONCILE_INTERVAL_MS: '100',
      RECONCILE_STALE_AFTER_MS: STALE_AFTER_MS,
    });

    expect({ code, stderr, failed: stdout.split('\n').filter((line) => line.includes('FAIL')) }).toEqual({
      code: 0,
      stderr: '',
      failed: [],
    });
    const headings = stdout.split('\n').filter((line) => line.startsWith('== '));
    expect(headings).toEqual(STEPS.map((title, index) => `== ${index + 1}. ${title} ==`));
    for (const section of stdout.split('\n== ').slice(1)) {
      expect(section).toMatch(/^ {2}-> /m);
      expect(section).toMatch(/^ {2}<- /m);
      expect(section).toMatch(/^ {2}ok {3}/m);
    }
    expect(stdout).toContain('Every step behaved as narrated.');

    // What the key and endpoint steps left behind, read from the database rather than from the narration.
    const [own] = (await new ApiKeysService(new ClientsRepository(stack.db)).list()).filter((client) => client.name.startsWith('demo 2'));
    expect(own.keys.map((key) => key.status)).toEqual(['revoked', 'active']);
    const endpoints = await stack.db.query<{ id: string; enabled_events: string[]; deleted: boolean }[]>(
      `SELECT id, enabled_events, deleted_at IS NOT NULL AS deleted FROM webhook_endpoints WHERE client_id = $1 ORDER BY created_at`,
      [own.id],
    );
    expect(endpoints.map(({ enabled_events, deleted }) => ({ enabled_events, deleted }))).toEqual([
      { enabled_events: ['*'], deleted: false },
      { enabled_events: ['payment.failed'], deleted: true },
    ]);
    // The merchant's endpoint was written a delivery for the declines after it, and for nothing else.
    const deliveries = await stack.db.query<{ type: string; status: string }[]>(
      `SELECT e.type, d.status FROM webhook_deliveries d JOIN events e ON e.id = d.event_id WHERE d.endpoint_id = $1`,
      [endpoints[1].id],
    );
    expect(deliveries).toEqual([
      { type: 'payment.failed', status: 'delivered' },
      { type: 'payment.failed', status: 'delivered' },
    ]);
  });

  it('exits 2, having run no step, when the stack is not there', async () => {
    const { code, stdout, stderr } = await runDemo(['--api', `http://127.0.0.1:${await freePort()}`, '--wait', '0'], {
      DATABASE_URL: TEST_DATABASE_URL,
    });

    expect({ code, stdout }).toEqual({ code: 2, stdout: '' });
    expect(stderr).toMatch(/does not answer 200: is the stack running\?/);
  });
});

function runDemo(args: string[], env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [join(__dirname, '..', 'dist', 'scripts', 'demo.js'), ...args], {
    env: { ...process.env, NODE_ENV: 'test', LOG_LEVEL: 'silent', ...env },
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((settle) => child.once('close', (code) => settle({ code, stdout, stderr })));
}
