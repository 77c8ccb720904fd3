import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import type { WorkerProcess } from './support/processes';
import { eventually } from './support/eventually';
import { useProcessStack } from './support/process-stack';

jest.setTimeout(60_000);

/** The payment method whose charges the provider below answers with a body Postgres cannot store. */
const POISONED_METHOD = 'pm_card_poisoned';

/**
 * A provider that keeps every charge it is asked for and, while `answering`,
 * answers with it; a charge for POISONED_METHOD is a decline whose
 * failure_code holds U+0000, which no text column can store. Until
 * `answering`, it answers 503 without keeping anything.
 */
async function startPoisonedProvider(): Promise<{ url: string; answering: { on: boolean }; charges: Map<string, string>; server: Server }> {
  const answering = { on: false };
  const charges = new Map<string, string>();
  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (body += chunk));
    req.on('end', () => {
      if (!answering.on) {
        res.writeHead(503).end();
        return;
      }
      if (req.method !== 'POST') {
        res.writeHead(404, { 'Content-Type': 'application/json' }).end('{"error":"not found"}');
        return;
      }
      const { amount, currency, payment_method: method, reference } = JSON.parse(body) as Record<string, string>;
      const key = String(req.headers['idempotency-key']);
      charges.set(key, reference);
      const poisoned = method === POISONED_METHOD;
      const charge = {
        id: `ch_${key.slice(-12)}`,
        status: poisoned ? 'failed' : 'succeeded',
        amount,
        currency,
        failure_code: poisoned ? 'do_not_honor\u0000' : null,
      };
      res.writeHead(201, { 'Content-Type': 'application/json' }).end(JSON.stringify(charge));
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, answering, charges, server };
}

/**
 * One provider answer the database cannot store affects its own payment and
 * no other: not the request (no 500, the outcome is unknown), not the other
 * payments of a reconcile job (their charges are recorded), and the
 * poisoned one climbs the ladder to review instead of staying pending.
 */
describe('a provider answer the database cannot store', () => {
  const stack = useProcessStack({ client: 'poisoned answers' });
  let provider: Awaited<ReturnType<typeof startPoisonedProvider>>;
  let worker: WorkerProcess | undefined;

  beforeEach(async () => {
    provider = await startPoisonedProvider();
  });
  afterEach(async () => {
    await worker?.stop();
    worker = undefined;
    provider.server.closeAllConnections();
    provider.server.close();
  });

  const post = (client: { post: (key: string, payload: object) => Promise<{ status: number; body: { id?: string; status?: string } }> }, method: string) =>
    client.post(randomUUID(), { amount: 700, currency: 'USD', payment_method: method });

  it('is an unknown outcome to the request: 202 pending on the first try and on a retry, never a 500', async () => {
    provider.answering.on = true;
    const api = await stack.startApi({ PROVIDER_URL: provider.url });
    try {
      const client = stack.clientOf(api);
      const key = randomUUID();
      const payload = { amount: 700, currency: 'USD', payment_method: POISONED_METHOD };

      const first = await client.post(key, payload);
      const retry = await client.post(key, payload);

      expect(first).toMatchObject({ status: 202, body: { status: 'pending' } });
      expect(retry).toMatchObject({ status: 202, body: { id: first.body.id, status: 'pending' } });
    } finally {
      await api.stop();
    }
  });

  it('holds back no other payment of the reconcile job, and reaches review on the ladder', async () => {
    // The provider is down while the payments are made: each is left pending, for the worker.
    const api = await stack.startApi({ PROVIDER_URL: provider.url, PROVIDER_MAX_ATTEMPTS: '1' });
    const client = stack.clientOf(api);
    const made = [];
    try {
      for (const method of ['pm_card_ok', POISONED_METHOD, 'pm_card_ok', 'pm_card_ok']) made.push(await post(client, method));
    } finally {
      await api.stop();
    }
    expect(made.map(({ status }) => status)).toEqual([202, 202, 202, 202]);
    const [poisoned, ...plain] = [made[1], made[0], made[2], made[3]].map(({ body }) => body.id!);

    provider.answering.on = true;
    worker = await stack.startWorker({ PROVIDER_URL: provider.url, RECONCILE_MAX_ATTEMPTS: '3' });

    const statuses = await eventually(
      async () => {
        const rows: { id: string; status: string }[] = await stack.db.query(
          `SELECT id, status FROM payments WHERE id = ANY($1)`,
          [[poisoned, ...plain]],
        );
        const byId = new Map(rows.map((row) => [row.id, row.status]));
        return byId.get(poisoned) === 'requires_review' ? byId : undefined;
      },
      { timeoutMs: 30_000, what: 'the poisoned payment to reach review' },
    );
    expect(plain.map((id) => statuses.get(id))).toEqual(['succeeded', 'succeeded', 'succeeded']);
    const [review]: { failure_code: string; reconcile_attempts: number }[] = await stack.db.query(
      `SELECT failure_code, reconcile_attempts FROM payments WHERE id = $1`,
      [poisoned],
    );
    expect(review.failure_code).toBe('reconciliation_exhausted');
    // One charge per payment at the provider, whatever the retries.
    expect(new Set(provider.charges.values())).toEqual(new Set([poisoned, ...plain]));
  });
});
