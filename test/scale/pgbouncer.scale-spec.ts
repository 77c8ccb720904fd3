import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Client } from 'pg';
import { runAudit } from '../../scripts/audit';
import { type PrivatePgBouncer, startPrivatePgBouncer } from '../support/private-pgbouncer';
import { freePort } from '../support/private-redis';
import { loadConfig } from '../../src/config/app-config';
import { TEST_DATABASE_URL, dropQueue, testConfig, uniqueQueuePrefix } from '../support/test-env';
import { ScaleStack, answer, payment } from './scale-stack';

/**
 * Every process (two APIs, two workers, the audit) reaches Postgres only
 * through a private PgBouncer in transaction pooling mode, with fewer server
 * connections than the processes' pools hold clients: each transaction gets
 * whichever server connection is free. Only the migrations go direct
 * (DATABASE_DIRECT_URL): their advisory lock is a session's.
 */
jest.setTimeout(120_000);

const run = promisify(execFile);
const MIGRATE = join(__dirname, '..', '..', 'dist', 'src', 'database', 'migrate.js');
/** Server connections the bouncer opens to the database: far fewer than 4 processes × 20 pooled clients. */
const POOL_SIZE = 4;
const DATABASE = new URL(TEST_DATABASE_URL).pathname.slice(1);

describe('every process through PgBouncer in transaction pooling mode', () => {
  let bouncer: PrivatePgBouncer;
  let pooledUrl: string;
  const queuePrefix = uniqueQueuePrefix();

  beforeAll(async () => {
    bouncer = await startPrivatePgBouncer({ poolSize: POOL_SIZE });
    pooledUrl = bouncer.urlFor(DATABASE);
    // The statement functions an earlier run made: this run's processes make their own.
    const direct = new Client({ connectionString: TEST_DATABASE_URL });
    await direct.connect();
    try {
      const { rows } = await direct.query<{ name: string }>(`SELECT oid::regprocedure::text AS name FROM pg_proc WHERE proname LIKE 'stmt\\_%'`);
      for (const { name } of rows) await direct.query(`DROP FUNCTION ${name}`);
    } finally {
      await direct.end();
    }
  });
  afterAll(async () => {
    await dropQueue(testConfig({ QUEUE_PREFIX: queuePrefix }));
    await bouncer?.stop();
  });

  const pooledEnv = () => ({
    DATABASE_URL: pooledUrl,
    DATABASE_DIRECT_URL: TEST_DATABASE_URL,
    DATABASE_PREPARED_STATEMENTS: 'functions',
    QUEUE_PREFIX: queuePrefix,
  });

  it('gives each server connection the session timeouts the pool asks for, and runs migrations on the direct connection', async () => {
    const client = new Client({ connectionString: pooledUrl, statement_timeout: 10_000 });
    await client.connect();
    try {
      // pg sends them as startup parameters, which the bouncer drops; its connect_query sets them.
      expect((await client.query('SHOW statement_timeout')).rows).toEqual([{ statement_timeout: '10s' }]);
      expect((await client.query('SHOW idle_in_transaction_session_timeout')).rows).toEqual([
        { idle_in_transaction_session_timeout: '10s' },
      ]);
    } finally {
      await client.end();
    }

    // Two runners at once, as two deploying containers would: they take turns on the lock.
    const runs = await Promise.all([1, 2].map(() => run(process.execPath, [MIGRATE], { env: { ...process.env, ...pooledEnv() } })));
    for (const { stdout } of runs) expect(JSON.parse(stdout)).toEqual({ msg: 'migrations done', applied: [] });
    const direct = new Client({ connectionString: TEST_DATABASE_URL });
    await direct.connect();
    try {
      // No server connection is left holding the migrations' lock.
      const { rows } = await direct.query(`SELECT count(*)::int AS held FROM pg_locks WHERE locktype = 'advisory'`);
      expect(rows).toEqual([{ held: 0 }]);
    } finally {
      await direct.end();
    }
  });

  describe('payments of every kind, reconciliation and merchant webhooks', () => {
    const stack = new ScaleStack();
    beforeAll(() =>
      stack.start({
        // A provider budget a busy machine can keep (the slow reply still outlasts the first attempt).
        env: { ...pooledEnv(), IDEMPOTENCY_LEASE_MS: '4000', PROVIDER_TIMEOUT_MS: '1500', PROVIDER_DEADLINE_MS: '3000' },
        // Events off: pending payments are the worker's to settle.
        providerEnv: { PROVIDER_SLOW_REPLY_MS: '2000', PROVIDER_PENDING_SETTLE_MS: '1500', PROVIDER_LATENCY_MS: '50' },
        apis: 2,
        workers: 2,
      }),
    );
    afterAll(() => stack.stop());

    it('one payment and one charge per key, every pending payment settled by a worker, every event delivered, a clean audit', async () => {
      const kinds = [
        ...Array<string>(12).fill('pm_card_ok'),
        ...Array<string>(4).fill('pm_card_declined'),
        ...Array<string>(4).fill('pm_card_lost_response'),
        ...Array<string>(4).fill('pm_card_timeout'),
        ...Array<string>(6).fill('pm_card_pending'),
      ];
      const requests = kinds.map((method, i) => ({ key: randomUUID(), body: payment(method, 1_000 + i) }));
      const sameKey = { key: randomUUID(), body: payment('pm_card_ok', 777) };
      const [replies, raced] = await Promise.all([
        Promise.all(requests.map(({ key, body }, i) => stack.clients[i % 2].post(key, body))),
        Promise.all(Array.from({ length: 24 }, (_, i) => stack.clients[i % 2].post(sameKey.key, sameKey.body))),
      ]);

      // On a busy machine a provider call may outlast its deadline: that
      // payment is answered 202 and settled later, like a pending one.
      const first: Record<string, string[]> = {
        pm_card_ok: ['201', '202'],
        pm_card_declined: ['402 card_declined', '202'],
        pm_card_lost_response: ['201', '202'],
        pm_card_timeout: ['201', '202'],
        pm_card_pending: ['202'],
      };
      expect(replies.filter((reply, i) => !first[kinds[i]].includes(answer(reply))).map(answer)).toEqual([]);
      const original = raced.filter((reply) => reply.status !== 409 && reply.headers.get('idempotent-replayed') === null);
      expect(original).toHaveLength(1);
      for (const reply of raced) {
        if (reply.status === 409) expect(reply.body.error?.code).toBe('idempotency_key_in_use');
        else expect(reply.body.id).toBe(original[0].body.id);
      }

      await stack.settled(30_000);
      // Every key, retried late, replays its payment's final answer.
      const final: Record<string, string> = { pm_card_declined: '402 card_declined', pm_card_pending: '201' };
      for (const [i, { key, body }] of requests.entries()) {
        const late = await stack.clients[1].post(key, body);
        expect({ answer: answer(late), replayed: late.headers.get('idempotent-replayed'), id: late.body.id }).toEqual({
          answer: final[kinds[i]] ?? '201',
          replayed: 'true',
          id: replies[i].body.id,
        });
      }
      const pending = kinds.filter((kind) => kind === 'pm_card_pending');
      const reconciled = stack.workers.flatMap((worker) => worker.output()).filter((line) => line.includes('"payment reconciled"'));
      expect(reconciled.length).toBeGreaterThanOrEqual(pending.length);

      const ledger = await stack.ledger();
      expect(ledger).toHaveLength(kinds.length + 1);
      expect(ledger.filter((row) => row.charges !== 1)).toEqual([]);
      expect(ledger.filter((row) => row.status === 'succeeded')).toHaveLength(kinds.length + 1 - 4);

      const events = await stack.eventsDelivered(30_000);
      const byPayment = await stack.eventsByPayment();
      expect(events).toHaveLength(ledger.length);
      for (const row of ledger) expect(byPayment.get(row.id)).toEqual([`payment.${row.status}`]);

      const audit = await runAudit(loadConfig({ ...process.env, ...stack.env, REDIS_URL: testConfig().redisUrl }));
      expect(audit).toMatchObject({ ok: true });

      // The traffic went through the bouncer, many clients on few server connections.
      const pools = (await bouncer.admin('SHOW POOLS')).filter((pool) => pool.database === DATABASE);
      const servers = (await bouncer.admin('SHOW SERVERS')).filter((server) => server.database === DATABASE);
      const clients = (await bouncer.admin('SHOW CLIENTS')).filter((client) => client.database === DATABASE);
      const [stats] = (await bouncer.admin('SHOW STATS')).filter((row) => row.database === DATABASE);
      expect(pools.map((pool) => pool.pool_mode)).toEqual(['transaction']);
      expect(servers.length).toBeLessThanOrEqual(POOL_SIZE);
      expect(clients.length).toBeGreaterThan(POOL_SIZE);
      expect(Number(stats.total_xact_count)).toBeGreaterThan(2 * ledger.length);
      // The statements that may be planned once ran through functions these
      // processes made for them (DATABASE_PREPARED_STATEMENTS=functions), through the bouncer.
      const [made] = (await stack.db.query(`SELECT count(*)::int AS n FROM pg_proc WHERE proname LIKE 'stmt\\_%'`)) as { n: number }[];
      expect(made.n).toBeGreaterThan(0);
    });
  });

  describe('provider events', () => {
    const stack = new ScaleStack();
    let apiPort: number;
    beforeAll(async () => {
      apiPort = await freePort();
      await stack.start({
        env: { ...pooledEnv(), PORT: String(apiPort), RECONCILE_STALE_AFTER_MS: '600000' },
        providerEnv: {
          PROVIDER_PENDING_SETTLE_MS: '500',
          PROVIDER_WEBHOOK_URL: `http://127.0.0.1:${apiPort}/v1/provider/events`,
          PROVIDER_WEBHOOK_DUPLICATE_RATE: '0.5',
        },
        apis: 1,
        workers: 1,
      });
    });
    afterAll(() => stack.stop());

    it('settles pending payments from the provider events, each applied once, and announces them', async () => {
      const replies = await Promise.all(
        Array.from({ length: 10 }, (_, i) => stack.clients[0].post(randomUUID(), payment('pm_card_pending', 2_000 + i))),
      );
      expect(replies.map(answer)).toEqual(Array(10).fill('202'));

      // The worker waits 10 minutes before it looks: only the events can settle them now.
      await stack.settled(30_000);
      const ledger = await stack.ledger();
      expect(ledger.map((row) => [row.status, row.charges])).toEqual(Array(10).fill(['succeeded', 1]));
      const applied = (await stack.db.query(
        `SELECT count(*)::int AS n FROM processed_messages WHERE consumer = 'provider-events'`,
      )) as { n: number }[];
      expect(applied[0].n).toBeGreaterThanOrEqual(10);

      await stack.eventsDelivered(30_000);
      const audit = await runAudit(loadConfig({ ...process.env, ...stack.env, REDIS_URL: testConfig().redisUrl }));
      expect(audit).toMatchObject({ ok: true });
    });
  });
});
