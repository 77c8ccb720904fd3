import { QueryFailedError } from 'typeorm';
import { eventually } from '../../test/support/eventually';
import { useTestDatabase } from '../../test/support/test-database';
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

  it('keeps a connection whose statement failed on its own (a unique violation) in the pool', async () => {
    const pid = await backendPid();
    await queryRows(db.dataSource.manager, 'CREATE TEMP TABLE once (id int PRIMARY KEY)');
    await queryRows(db.dataSource.manager, 'INSERT INTO once VALUES (1)');

    await expect(queryRows(db.dataSource.manager, 'INSERT INTO once VALUES (1)')).rejects.toMatchObject({ code: '23505' });

    expect(await backendPid()).toBe(pid);
  });
});
