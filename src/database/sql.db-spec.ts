import { createHash } from 'node:crypto';
import { type EntityManager, QueryFailedError } from 'typeorm';
import { DATABASE_POOL_DEFAULTS } from '../config/app-config';
import { eventually } from '../../test/support/eventually';
import { TEST_DATABASE_URL } from '../../test/support/test-env';
import { useTestDatabase } from '../../test/support/test-database';
import { createDataSource } from './data-source';
import { fromInfrastructureError } from '../common/error-envelope';
import { TransportErrorCode } from '../common/transport-error';
import { queryRow, queryRows } from './sql';

/**
 * queryRows on the data source's own manager takes a connection of the pool
 * itself (no QueryRunner): what TypeORM did for such a statement, it must do.
 */
describe('queryRows outside a transaction', () => {
  const db = useTestDatabase();

  const backendPid = async () => (await queryRow<{ pid: number }>(db.dataSource.manager, 'SELECT pg_backend_pid() AS pid'))!.pid;

  it('fails the statement, not the process, when the server ends its connection meanwhile; the pool then serves again', async () => {
    // No listener of the pool's is on a connection while it is held: the
    // server's FATAL and the dropped socket reach queryRows' own.
    const sleep = 'SELECT pg_sleep(5) AS held';
    const statement = queryRows(db.dataSource.manager, sleep).then(
      () => undefined,
      (error: unknown) => error,
    );
    const pid = await eventually(
      async () =>
        (
          await queryRow<{ pid: number }>(
            db.dataSource.manager,
            `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND state = 'active' AND query = $1`,
            [sleep],
          )
        )?.pid,
      { what: 'the statement to be running' },
    );
    await queryRows(db.dataSource.manager, 'SELECT pg_terminate_backend($1)', [pid]);

    const failure = await statement;
    expect(failure).toBeInstanceOf(QueryFailedError);
    expect(fromInfrastructureError(failure)?.code).toBe(TransportErrorCode.ServiceUnavailable);
    // The terminated connection was discarded, not handed out again: the
    // pool hands out the connection released last first, which it would be.
    expect(await backendPid()).not.toBe(pid);
  });

  it('fails a statement that waits on a lock past its timeout as the service being unavailable, writing nothing', async () => {
    // A table of its own, dropped at the end: the database is the suite's.
    await queryRows(db.dataSource.manager, 'CREATE TABLE held_off (id int PRIMARY KEY)');
    const holder = db.dataSource.createQueryRunner();
    await holder.connect();
    try {
      // What a migration's ALTER TABLE holds until it commits.
      await holder.startTransaction();
      await holder.query('LOCK TABLE held_off IN ACCESS EXCLUSIVE MODE');

      const failure = await db.dataSource
        .transaction(async (tx) => {
          await tx.query(`SET LOCAL statement_timeout = '200ms'`);
          await tx.query('INSERT INTO held_off VALUES (1)');
        })
        .then(
          () => undefined,
          (error: unknown) => error,
        );

      expect(failure).toMatchObject({ driverError: { code: '57014' } });
      expect(fromInfrastructureError(failure)?.code).toBe(TransportErrorCode.ServiceUnavailable);
      await holder.rollbackTransaction();
      expect(await queryRows(db.dataSource.manager, 'SELECT id FROM held_off')).toEqual([]);
    } finally {
      if (holder.isTransactionActive) await holder.rollbackTransaction();
      await holder.release();
      await queryRows(db.dataSource.manager, 'DROP TABLE held_off');
    }
  });

  it('keeps a connection whose statement failed on its own (a unique violation) in the pool', async () => {
    const pid = await backendPid();
    await queryRows(db.dataSource.manager, 'CREATE TEMP TABLE once (id int PRIMARY KEY)');
    await queryRows(db.dataSource.manager, 'INSERT INTO once VALUES (1)');

    await expect(queryRows(db.dataSource.manager, 'INSERT INTO once VALUES (1)')).rejects.toMatchObject({ code: '23505' });

    expect(await backendPid()).toBe(pid);
  });
});

/**
 * Statements that may be planned once are prepared once per connection and
 * then run by name, on the pool and in a transaction alike, unless the data
 * source is told not to (behind a transaction-pooling PgBouncer); any other
 * statement is sent unnamed.
 */
describe('queryRows and prepared statements', () => {
  const db = useTestDatabase();
  const probe = 'SELECT $1::int + 1 AS n';

  /** The statements this session holds prepared, seen from the connection queryRows just used. */
  const preparedOn = (manager: EntityManager) =>
    queryRows<{ statement: string }>(manager, 'SELECT statement FROM pg_prepared_statements');

  it('prepares a statement once on a connection and runs it again by name', async () => {
    for (const n of [1, 2, 3]) {
      expect(await queryRow(db.dataSource.manager, probe, [n], { planOnce: true })).toEqual({ n: n + 1 });
    }
    // The pool hands out the connection released last first: one connection served all three.
    const prepared = (await preparedOn(db.dataSource.manager)).map((row) => row.statement);
    expect(prepared.filter((statement) => statement === probe)).toHaveLength(1);
  });

  it('names a statement by its text alone, so that a name means one text in every process', async () => {
    for (const text of [probe, 'SELECT $1::int + 3 AS n']) {
      await queryRow(db.dataSource.manager, text, [1], { planOnce: true });
      const rows = await queryRows<{ name: string }>(db.dataSource.manager, 'SELECT name FROM pg_prepared_statements WHERE statement = $1', [text]);
      expect(rows).toEqual([{ name: `s_${createHash('sha256').update(text).digest('hex').slice(0, 32)}` }]);
    }
  });

  it('sends any other statement unnamed, so that it is planned for its values at every run', async () => {
    const other = 'SELECT $1::int + 2 AS n';
    expect(await queryRow(db.dataSource.manager, other, [1])).toEqual({ n: 3 });
    expect((await preparedOn(db.dataSource.manager)).map((row) => row.statement)).not.toContain(other);
    // Postgres' own choice for a prepared statement: a generic plan once it costs no more than its custom ones.
    expect(await queryRow(db.dataSource.manager, 'SHOW plan_cache_mode')).toEqual({ plan_cache_mode: 'auto' });
  });

  it('runs a transaction’s statements on its connection, prepared there, and fails them as TypeORM would', async () => {
    await db.dataSource.transaction(async (tx) => {
      await queryRows(tx, 'CREATE TEMP TABLE seen (id int PRIMARY KEY) ON COMMIT DROP');
      await queryRows(tx, 'INSERT INTO seen VALUES ($1)', [7], { planOnce: true });
      expect(await queryRows(tx, 'SELECT id FROM seen')).toEqual([{ id: 7 }]);
      expect((await preparedOn(tx)).map((row) => row.statement)).toContain('INSERT INTO seen VALUES ($1)');
      await expect(queryRows(tx, 'INSERT INTO seen VALUES ($1)', [7], { planOnce: true })).rejects.toBeInstanceOf(QueryFailedError);
    });
  });

  it('prepares nothing when the data source is told not to', async () => {
    const unprepared = await createDataSource({
      databaseUrl: TEST_DATABASE_URL,
      databasePool: { ...DATABASE_POOL_DEFAULTS, preparedStatements: 'off' },
    }).initialize();
    try {
      expect(await queryRow(unprepared.manager, probe, [1], { planOnce: true })).toEqual({ n: 2 });
      expect(await preparedOn(unprepared.manager)).toEqual([]);
    } finally {
      await unprepared.destroy();
    }
  });
});
