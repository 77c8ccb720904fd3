import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import request from 'supertest';
import { eventually } from './support/eventually';
import { useInProcessStack } from './support/in-process-app';
import { TEST_DATABASE_URL } from './support/test-env';
import { preparedStatementTexts } from '../src/database/sql';

jest.setTimeout(60_000);

/** A scan in an EXPLAIN (FORMAT JSON) plan. */
interface Scan {
  nodeType: string;
  relation: string;
  index?: string;
  indexCond?: string;
}

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Index Cond'?: string;
  Plans?: PlanNode[];
}

/** Every scan of a table, with the index it goes through; a bitmap scan's index is its child's. */
function scansOf(node: PlanNode, into: Scan[] = []): Scan[] {
  const relation = node['Relation Name'];
  if (relation && node['Node Type'] === 'Bitmap Heap Scan') {
    const bitmap = (node.Plans ?? []).find((child) => child['Node Type'] === 'Bitmap Index Scan');
    into.push({ nodeType: node['Node Type'], relation, index: bitmap?.['Index Name'], indexCond: bitmap?.['Index Cond'] });
    return into;
  }
  if (relation && node['Node Type'].endsWith('Scan')) {
    into.push({ nodeType: node['Node Type'], relation, index: node['Index Name'], indexCond: node['Index Cond'] });
  }
  for (const child of node.Plans ?? []) scansOf(child, into);
  return into;
}

/**
 * A client's webhook endpoints (at most 16) are read through any index that
 * leads with client_id, each reading the same rows: two such indexes are
 * not a wrong choice to be made.
 */
const EITHER_INDEX_WILL_DO = new Set(['webhook_endpoints']);

/**
 * The statements the service prepares and Postgres may plan once (planOnce
 * in src/database/sql.ts) must have one plan that is right for every value
 * and every size of table. Postgres weighs usable indexes by estimated cost,
 * and while tables are small the costs tie: a generic plan made then is
 * kept for the session, whatever the tables grow to. So every lookup in such
 * a statement must have exactly one index that can serve it.
 *
 * The stack pays, declines, replays, reads, refunds, leaves a charge pending
 * for the worker and takes a provider event, so every statement of those
 * paths gets prepared. Then each is planned generically, and for each index
 * its plan uses, planned again without that index (dropped in a transaction
 * that is rolled back) and with sequential scans priced out: no other index
 * may then serve the lookup (take an Index Cond).
 */
describe('statements planned once', () => {
  const stack = useInProcessStack(
    {
      client: 'planned',
      providerEvents: true,
      providerEnv: { PROVIDER_PENDING_SETTLE_MS: '300' },
      // Named statements, whatever the environment says: they are what this spec reads back.
      config: { DATABASE_PREPARED_STATEMENTS: 'true' },
    },
    'file',
  );
  let pg: Client;

  beforeAll(async () => {
    pg = new Client({ connectionString: TEST_DATABASE_URL });
    await pg.connect();
  });
  afterAll(() => pg.end());

  const post = (path: string, body: object, key = randomUUID()) =>
    request(stack.url).post(path).set('Authorization', `Bearer ${stack.apiKey}`).set('Idempotency-Key', key).send(body);

  /** The generic plan of `text`, with `setup` (statements) run first in the same transaction. */
  async function genericPlan(text: string, setup: string[] = []): Promise<Scan[]> {
    await pg.query('SAVEPOINT plan');
    try {
      for (const statement of setup) await pg.query(statement);
      await pg.query('SET LOCAL plan_cache_mode = force_generic_plan');
      await pg.query(`PREPARE checked AS ${text}`);
      const [{ count }] = (
        await pg.query<{ count: number }>(
          `SELECT cardinality(parameter_types) AS count FROM pg_prepared_statements WHERE name = 'checked'`,
        )
      ).rows;
      const nulls = Array.from({ length: count }, () => 'NULL').join(', ');
      const explained = await pg.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(
        `EXPLAIN (FORMAT JSON) EXECUTE checked${count > 0 ? `(${nulls})` : ''}`,
      );
      await pg.query('DEALLOCATE checked');
      return scansOf(explained.rows[0]['QUERY PLAN'][0].Plan);
    } finally {
      await pg.query('ROLLBACK TO SAVEPOINT plan');
    }
  }

  /** The statement that drops `index` (a constraint's index goes with its constraint, and what depends on it). */
  async function dropping(index: string): Promise<string> {
    const { rows } = await pg.query<{ constraint: string | null; table: string }>(
      `SELECT c.conname AS constraint, i.indrelid::regclass::text AS table
         FROM pg_index i LEFT JOIN pg_constraint c ON c.conindid = i.indexrelid
        WHERE i.indexrelid = $1::regclass`,
      [index],
    );
    const [{ constraint, table }] = rows;
    return constraint ? `ALTER TABLE ${table} DROP CONSTRAINT ${constraint} CASCADE` : `DROP INDEX ${index}`;
  }

  /**
   * Whether a scan of `index` under `indexCond` starts from a value of its
   * first column (an equality on it), as a lookup does. A condition on later
   * columns alone makes the scan read the whole index, which Postgres never
   * prices as low as a lookup by a unique key.
   */
  async function boundsLeadingColumn(index: string, indexCond: string | undefined): Promise<boolean> {
    if (!indexCond) return false;
    const { rows } = await pg.query<{ column: string }>(
      `SELECT a.attname AS column FROM pg_index i
         JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
        WHERE i.indexrelid = $1::regclass`,
      [index],
    );
    return indexCond.includes(`(${rows[0].column} = `);
  }

  /**
   * The texts of every statement the service's paths prepare, driven once
   * for the file by whichever test asks first (the texts hold no data, so a
   * later test's emptied tables do not matter to them).
   */
  let prepared: Promise<string[]> | undefined;
  const preparedByThePaths = () => (prepared ??= driveThePaths());

  /** The stack pays, declines, replays, reads, refunds, leaves a charge pending for the worker and takes a provider event. */
  async function driveThePaths(): Promise<string[]> {
    const paid = await post('/v1/payments', { amount: 500, currency: 'EUR', payment_method: 'pm_card_ok' });
    expect(paid.status).toBe(201);
    const key = randomUUID();
    expect((await post('/v1/payments', { amount: 700, currency: 'EUR', payment_method: 'pm_card_declined' }, key)).status).toBe(402);
    expect((await post('/v1/payments', { amount: 700, currency: 'EUR', payment_method: 'pm_card_declined' }, key)).status).toBe(402);
    const read = await request(stack.url).get(`/v1/payments/${paid.body.id}`).set('Authorization', `Bearer ${stack.apiKey}`);
    expect(read.status).toBe(200);
    expect((await post('/v1/refunds', { payment: paid.body.id, amount: 100 })).status).toBe(201);
    await stack.startWorker({ RECONCILE_INTERVAL_MS: '100', RECONCILE_STALE_AFTER_MS: '0' });
    const pending = await post('/v1/payments', { amount: 900, currency: 'EUR', payment_method: 'pm_card_pending' });
    expect(pending.status).toBe(202);
    await eventually(
      async () => {
        const [row] = (await stack.dataSource.query('SELECT status FROM payments WHERE id = $1', [pending.body.id])) as { status: string }[];
        return row.status === 'succeeded' || undefined;
      },
      { what: 'the pending charge to be settled', timeoutMs: 20_000 },
    );
    // Nothing else runs while the checks below drop indexes in their transaction.
    await stack.stopWorkers();
    const statements = preparedStatementTexts();
    // What a create and a refund send: both claims, the fenced outcome, the key's read, a read by id.
    for (const fragment of ['INSERT INTO payments', 'WITH claimed AS', 'WITH held AS MATERIALIZED', 'FROM idempotency_keys', 'FOR UPDATE']) {
      expect(statements.some((text) => text.includes(fragment))).toBe(true);
    }
    expect(statements.length).toBeGreaterThan(5);
    return statements;
  }

  /**
   * A parameter Postgres types as a domain (by the column it is assigned to)
   * is checked while it is decoded, and the decoding sets the domain up
   * again for every value (domain_in): more than the check costs. Each such
   * placeholder carries a cast to the domain's base type, so the domain's
   * check runs in the statement, set up once per execution.
   */
  it('binds no parameter as a domain', async () => {
    const domainBound: string[] = [];
    for (const text of await preparedByThePaths()) {
      await pg.query(`PREPARE typed AS ${text}`);
      const { rows } = await pg.query<{ position: number; domain: string }>(
        `SELECT t.position, d.typname AS domain
           FROM pg_prepared_statements s, unnest(s.parameter_types) WITH ORDINALITY AS t(type, position)
           JOIN pg_type d ON d.oid = t.type::regtype AND d.typtype = 'd'
          WHERE s.name = 'typed'`,
      );
      await pg.query('DEALLOCATE typed');
      for (const { position, domain } of rows) domainBound.push(`$${position} as ${domain} in: ${text}`);
    }
    expect(domainBound).toEqual([]);
  });

  it('finds every row through the one index that can serve its lookup', async () => {
    const statements = await preparedByThePaths();
    await pg.query('BEGIN');
    const ambiguous: string[] = [];
    try {
      for (const text of statements) {
        const scans = await genericPlan(text);
        for (const scan of scans) {
          if (scan.nodeType === 'Seq Scan') ambiguous.push(`${scan.relation} read in full by: ${text}`);
        }
        const used = new Map(scans.filter((scan) => scan.index).map((scan) => [scan.index!, scan.relation]));
        for (const [index, relation] of used) {
          if (EITHER_INDEX_WILL_DO.has(relation)) continue;
          const without = await genericPlan(text, [await dropping(index), 'SET LOCAL enable_seqscan = off']);
          for (const scan of without) {
            if (scan.relation === relation && scan.index && (await boundsLeadingColumn(scan.index, scan.indexCond))) {
              ambiguous.push(`${relation}: ${scan.index} as well as ${index} can serve: ${text}`);
            }
          }
        }
      }
    } finally {
      await pg.query('ROLLBACK');
    }
    expect(ambiguous).toEqual([]);
  });

  /**
   * The commit-time status check (status_has_event) runs its lookup as static
   * PL/pgSQL, whose plans Postgres also keeps for the session. Its lookup
   * binds every column of a unique index, so it expects one row, and no
   * index that binds the client alone can be priced lower: the generic plan
   * goes through the unique index, and the function sets no planner option
   * of its own (a setting is saved and restored around every call).
   */
  it('checks a status change’s event through the events’ unique index', async () => {
    const [{ source, config }] = (
      await pg.query<{ source: string; config: string[] | null }>(
        `SELECT prosrc AS source, proconfig AS config FROM pg_proc WHERE proname = 'status_has_event'`,
      )
    ).rows;
    expect(config).toBeNull();
    await pg.query('BEGIN');
    try {
      for (const [column, index] of [
        ['payment_id', 'events_payment_type_key'],
        ['refund_id', 'events_refund_type_key'],
      ]) {
        expect(source).toContain(`e.client_id = NEW.client_id AND e.${column} = NEW.id AND e.type = event_type`);
        const lookup = `SELECT EXISTS (SELECT 1 FROM events e WHERE e.client_id = $1::uuid AND e.${column} = $2::text AND e.type = $3::text)`;
        expect(await genericPlan(lookup)).toEqual([expect.objectContaining({ relation: 'events', index })]);
      }
    } finally {
      await pg.query('ROLLBACK');
    }
  });
});
