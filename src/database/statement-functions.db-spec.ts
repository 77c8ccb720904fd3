import { Logger } from '@nestjs/common';
import { type DataSource, QueryFailedError } from 'typeorm';
import { RetryableQueryError } from '../common/retryable-query-error';
import { DATABASE_POOL_DEFAULTS } from '../config/app-config';
import { eventually } from '../../test/support/eventually';
import { TEST_DATABASE_URL, assertTestDatabase } from '../../test/support/test-env';
import { createDataSource } from './data-source';
import type { Pool } from 'pg';
import type { PostgresDriver } from 'typeorm/driver/postgres/PostgresDriver.js';
import { isUniqueViolation, queryRow, queryRows, statementFunctionsOf } from './sql';
import { StatementFunctions } from './statement-functions';

/**
 * DATABASE_PREPARED_STATEMENTS=functions: a statement that may be planned
 * once runs through a PL/pgSQL function made for it after its first run,
 * and must answer exactly as the statement sent unnamed does: the same rows
 * and types, the same errors, in the caller's transaction.
 */
describe('queryRows through statement functions', () => {
  /** Makes and drops the spec's own table; sends every statement unnamed. */
  let admin: DataSource;
  const sources: DataSource[] = [];

  const functionsSource = async (size = DATABASE_POOL_DEFAULTS.size) => {
    const source = await createDataSource({
      databaseUrl: TEST_DATABASE_URL,
      databasePool: { ...DATABASE_POOL_DEFAULTS, size, preparedStatements: 'functions' },
    }).initialize();
    sources.push(source);
    return source;
  };

  /** Runs `statement` once (as it is), and waits until its function is made. */
  const made = async (source: DataSource, statement: string, params: unknown[]) => {
    await queryRows(source.manager, statement, params, { planOnce: true }).catch(() => undefined);
    await statementFunctionsOf(source.manager).settled();
  };

  /** The statement functions whose body runs `table`'s statements. */
  const functionsOf = async (table: string) =>
    (
      await queryRows<{ name: string }>(
        admin.manager,
        `SELECT proname AS name FROM pg_proc WHERE proname LIKE 'stmt\\_%' AND prosrc LIKE '%' || $1 || '%' ORDER BY proname`,
        [table],
      )
    ).map((row) => row.name);

  beforeAll(async () => {
    assertTestDatabase(TEST_DATABASE_URL);
    admin = await createDataSource({ databaseUrl: TEST_DATABASE_URL, databasePool: { ...DATABASE_POOL_DEFAULTS, preparedStatements: 'off' } }).initialize();
    // What a run that ended before its afterAll left.
    await queryRows(admin.manager, 'DROP TABLE IF EXISTS fn_items, fn_later, fn_later_away');
    await queryRows(admin.manager, 'DROP DOMAIN IF EXISTS fn_code');
    await queryRows(admin.manager, `CREATE DOMAIN fn_code AS text CHECK (VALUE ~ '^[a-z]+$')`);
    await queryRows(
      admin.manager,
      `CREATE TABLE fn_items (id int PRIMARY KEY, code fn_code NOT NULL, tag character(3), tags text[], note text,
                              at timestamptz NOT NULL DEFAULT now())`,
    );
  });

  afterAll(async () => {
    for (const name of await functionsOf('fn_items')) await queryRows(admin.manager, `DROP FUNCTION ${name}`);
    await queryRows(admin.manager, 'DROP TABLE fn_items');
    await queryRows(admin.manager, 'DROP DOMAIN fn_code');
    await Promise.all([admin, ...sources].map((source) => source.destroy()));
  });

  beforeEach(async () => {
    await queryRows(admin.manager, 'TRUNCATE fn_items');
    await queryRows(admin.manager, `INSERT INTO fn_items (id, code) VALUES (100, 'seed')`);
  });

  const insert = `INSERT INTO fn_items (id, code, tag, tags, note) VALUES ($1, $2, $3, $4, $5)
                  RETURNING id, code, tag, tags, note, at, at IS NOT NULL AS "hasTime"`;

  it('answers with the rows, types and nulls of the statement sent as it is, through one function made for it', async () => {
    const fx = await functionsSource();
    await made(fx, insert, [100, 'abc', null, null, null]);

    const direct = await queryRow<Record<string, unknown>>(admin.manager, insert, [1, 'abc', 'xy', ['a', 'b'], null]);
    const through = await queryRow<Record<string, unknown>>(fx.manager, insert, [2, 'abc', 'xy', ['a', 'b'], null], { planOnce: true });

    expect(through).toEqual({ ...direct, id: 2, at: expect.any(Date) });
    expect(direct).toMatchObject({ tag: 'xy ', tags: ['a', 'b'], note: null, hasTime: true });
    expect(await functionsOf('fn_items')).toHaveLength(1);

    // The call runs the function: dropped (here renamed) under the process,
    // it is not found. A transaction fails, as one that may be sent again
    // (answered 503); on the pool the statement runs again as it is. Either
    // way the function is made again.
    const [name] = await functionsOf('fn_items');
    await queryRows(admin.manager, `ALTER FUNCTION ${name} RENAME TO ${name}_away`);
    const inTransaction = fx.transaction((tx) => queryRows(tx, insert, [3, 'abc', null, null, null], { planOnce: true }));
    await expect(inTransaction).rejects.toBeInstanceOf(RetryableQueryError);
    await expect(inTransaction).rejects.toMatchObject({ driverError: { code: '42883' } });
    expect(await queryRow(fx.manager, insert, [3, 'abc', null, null, null], { planOnce: true })).toMatchObject({ id: 3 });
    await statementFunctionsOf(fx.manager).settled();
    expect(await functionsOf('fn_items')).toEqual([name, `${name}_away`]);

    await queryRows(admin.manager, `DROP FUNCTION ${name}`);
    expect(await queryRow(fx.manager, insert, [4, 'abc', null, null, null], { planOnce: true })).toMatchObject({ id: 4 });
    expect(await queryRow(fx.manager, insert, [5, 'abc', null, null, null], { planOnce: true })).toMatchObject({ id: 5 });
    await statementFunctionsOf(fx.manager).settled();
    expect(await functionsOf('fn_items')).toEqual([name, `${name}_away`]);
    expect(await queryRow(fx.manager, insert, [6, 'abc', null, null, null], { planOnce: true })).toMatchObject({ id: 6 });
  });

  it('makes one function when several processes first run the statement at once, and every one of them calls it', async () => {
    const statement = `SELECT id, code FROM fn_items WHERE id = $1`;
    const sources = await Promise.all([functionsSource(), functionsSource(), functionsSource()]);

    await Promise.all(sources.map((source) => made(source, statement, [100])));

    expect((await functionsOf('fn_items WHERE id = $1')).length).toBe(1);
    for (const source of sources) expect(statementFunctionsOf(source.manager).callFor(statement)).toMatch(/ FROM "public"\.stmt_/);
    const rows = await Promise.all(sources.map((source) => queryRow(source.manager, statement, [100], { planOnce: true })));
    expect(rows).toEqual(Array(3).fill({ id: 100, code: 'seed' }));
  });

  it('uses the function another process made while it was making the same one (its CREATE a duplicate)', async () => {
    const statement = `SELECT id FROM fn_items WHERE id = $1 AND code IS DISTINCT FROM ''`;
    await made(await functionsSource(), statement, [100]);
    const [name] = await functionsOf('IS DISTINCT FROM');
    const [{ definition }] = await queryRows<{ definition: string }>(admin.manager, `SELECT pg_get_functiondef('${name}'::regproc) AS definition`);
    await queryRows(admin.manager, `DROP FUNCTION ${name}`);
    // Another process's CREATE, not yet committed: this one's check finds no function, and its CREATE waits on it.
    const other = admin.createQueryRunner();
    await other.connect();
    try {
      await other.startTransaction();
      await other.query(definition);
      const fx = await functionsSource();
      const making = made(fx, statement, [100]);
      await eventually(
        async () =>
          (
            await queryRows(admin.manager, `SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'CREATE FUNCTION %${name}%'`)
          ).length > 0 || undefined,
        { what: 'the second CREATE to wait on the first' },
      );
      await other.commitTransaction();
      await making;

      expect(statementFunctionsOf(fx.manager).callFor(statement)).toMatch(new RegExp(`FROM "public"\\.${name}\\(`));
      expect(await functionsOf('IS DISTINCT FROM')).toEqual([name]);
    } finally {
      if (other.isTransactionActive) await other.rollbackTransaction();
      await other.release();
    }
  });

  it('fails as the statement fails: the same SQLSTATE and constraint, under the statement’s own text', async () => {
    const fx = await functionsSource();
    await made(fx, insert, [100, 'abc', null, null, null]);

    const duplicate = await queryRows(fx.manager, insert, [100, 'abc', null, null, null], { planOnce: true }).catch((error: unknown) => error);
    expect(duplicate).toBeInstanceOf(QueryFailedError);
    expect(duplicate).toMatchObject({ query: insert, driverError: { code: '23505', constraint: 'fn_items_pkey' } });
    expect(isUniqueViolation(duplicate, 'fn_items_pkey')).toBe(true);

    await expect(queryRows(fx.manager, insert, [9, 'NOT LOWER', null, null, null], { planOnce: true })).rejects.toMatchObject({
      driverError: { code: '23514' },
    });
    await expect(queryRows(fx.manager, insert, ['nine', 'abc', null, null, null], { planOnce: true })).rejects.toMatchObject({
      driverError: { code: '22P02' },
    });
  });

  it('runs in the caller’s transaction: its writes are the transaction’s, and go with its rollback', async () => {
    const fx = await functionsSource();
    const read = `SELECT id FROM fn_items WHERE id = $1`;
    await made(fx, insert, [100, 'abc', null, null, null]);
    await made(fx, read, [100]);

    await expect(
      fx.transaction(async (tx) => {
        await queryRows(tx, insert, [20, 'abc', null, null, null], { planOnce: true });
        expect(await queryRow(tx, read, [20], { planOnce: true })).toEqual({ id: 20 });
        throw new Error('roll back');
      }),
    ).rejects.toThrow('roll back');

    expect(await queryRow(fx.manager, read, [20], { planOnce: true })).toBeUndefined();
  });

  it('sends a statement that returns no rows as it is, and makes no function for it', async () => {
    const fx = await functionsSource();
    const update = `UPDATE fn_items SET note = $2 WHERE id = $1`;

    await made(fx, update, [100, 'seen']);

    expect(statementFunctionsOf(fx.manager).callFor(update)).toBeUndefined();
    expect(await queryRow(fx.manager, 'SELECT note FROM fn_items WHERE id = 100')).toEqual({ note: 'seen' });
    expect(await functionsOf('SET note')).toEqual([]);
  });

  it('sends as it is a statement whose columns a function cannot return as they are: a row, a record', async () => {
    const fx = await functionsSource();
    const row = `SELECT fn_items AS item FROM fn_items WHERE id = $1`;
    const pair = `SELECT (id, code) AS pair FROM fn_items WHERE id = $1`;

    await made(fx, row, [100]);
    await made(fx, pair, [100]);

    expect(statementFunctionsOf(fx.manager).callFor(row)).toBeUndefined();
    expect(statementFunctionsOf(fx.manager).callFor(pair)).toBeUndefined();
    expect(await queryRow(fx.manager, pair, [100], { planOnce: true })).toEqual({ pair: '(100,seed)' });
    expect(await functionsOf('AS item')).toEqual([]);
    expect(await functionsOf('AS pair')).toEqual([]);
  });

  it('uses a function of the expected name only if it is this statement’s, made by this role', async () => {
    const statement = `SELECT id, code FROM fn_items WHERE id = $1 AND id > 0`;
    await made(await functionsSource(), statement, [100]);
    const [name] = await functionsOf('AND id > 0');
    await queryRows(
      admin.manager,
      `CREATE OR REPLACE FUNCTION ${name}(integer) RETURNS TABLE (r1 integer, r2 text) LANGUAGE sql AS 'SELECT 1, ''planted''::text'`,
    );
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    try {
      const fx = await functionsSource();
      await made(fx, statement, [100]);

      expect(statementFunctionsOf(fx.manager).callFor(statement)).toBeUndefined();
      expect(await queryRow(fx.manager, statement, [100], { planOnce: true })).toEqual({ id: 100, code: 'seed' });
      expect(warn).toHaveBeenCalledWith(expect.objectContaining({ err: expect.objectContaining({ message: expect.stringContaining('is not this statement') }) }));
    } finally {
      warn.mockRestore();
      await queryRows(admin.manager, `DROP FUNCTION ${name}`);
    }
  });

  it('gives up a making that waits too long (here on a lock), and makes the function at a later try', async () => {
    const fx = await functionsSource();
    const functions = new StatementFunctions((fx.driver as PostgresDriver).master as Pool, 10, 300);
    const statement = `SELECT id FROM fn_items WHERE id = $1 AND code <> ''`;
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    const holder = admin.createQueryRunner();
    await holder.connect();
    try {
      await holder.startTransaction();
      await holder.query('LOCK TABLE fn_items IN ACCESS EXCLUSIVE MODE');
      expect(functions.callFor(statement)).toBeUndefined();
      await functions.settled();
      expect(warn).toHaveBeenCalledWith(
        expect.objectContaining({ err: expect.objectContaining({ message: 'statement function not made within 300 ms' }) }),
      );
      await holder.rollbackTransaction();

      jest.spyOn(Date, 'now').mockReturnValue(Date.now() + 1_001);
      expect(functions.callFor(statement)).toBeUndefined();
      await functions.settled();
      expect(functions.callFor(statement)).toMatch(/^SELECT r1 AS "id" FROM "public"\.stmt_/);
    } finally {
      jest.restoreAllMocks();
      if (holder.isTransactionActive) await holder.rollbackTransaction();
      await holder.release();
    }
  });

  it('sends the statement as it is until its function is made: a transaction holding the only connection does not wait for one', async () => {
    const fx = await functionsSource(1);
    const statement = `SELECT code FROM fn_items WHERE id = $1 AND code IS NOT NULL`;

    const inTransaction = await fx.transaction((tx) => queryRow(tx, statement, [100], { planOnce: true }));

    expect(inTransaction).toEqual({ code: 'seed' });
    await statementFunctionsOf(fx.manager).settled();
    expect(await functionsOf('code IS NOT NULL')).toHaveLength(1);
  });

  it('tries again to make a function that could not be made, a second later, then waiting twice as long each time', async () => {
    const fx = await functionsSource();
    const statement = `SELECT id FROM fn_later WHERE id = $1`;
    const functions = statementFunctionsOf(fx.manager);
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);

    await expect(queryRows(fx.manager, statement, [1], { planOnce: true })).rejects.toMatchObject({
      query: statement,
      driverError: { code: '42P01' },
    });
    await functions.settled();
    expect(warn).toHaveBeenCalledWith(
      expect.objectContaining({ msg: 'statement function not made: the statement is sent as it is', statement }),
    );

    await queryRows(admin.manager, 'CREATE TABLE fn_later (id int PRIMARY KEY)');
    await queryRows(admin.manager, 'INSERT INTO fn_later VALUES (1)');
    try {
      expect(await queryRow(fx.manager, statement, [1], { planOnce: true })).toEqual({ id: 1 });
      await functions.settled();
      expect(await functionsOf('fn_later')).toEqual([]);

      // The first failure waits a second, the next ones twice as long each time.
      const now = Date.now();
      jest.spyOn(Date, 'now').mockReturnValue(now + 1_001);
      await queryRows(admin.manager, 'ALTER TABLE fn_later RENAME TO fn_later_away');
      await made(fx, statement, [1]);
      expect(warn).toHaveBeenCalledTimes(2);
      expect(warn).toHaveBeenLastCalledWith(expect.objectContaining({ retryInMs: 2_000 }));
      await queryRows(admin.manager, 'ALTER TABLE fn_later_away RENAME TO fn_later');
      jest.spyOn(Date, 'now').mockReturnValue(now + 2_500);
      await made(fx, statement, [1]);
      expect(warn).toHaveBeenCalledTimes(2);
      expect(await functionsOf('fn_later')).toEqual([]);
      jest.spyOn(Date, 'now').mockReturnValue(now + 3_100);
      await made(fx, statement, [1]);
      expect(await functionsOf('fn_later')).toHaveLength(1);
      expect(functions.callFor(statement)).toMatch(/^SELECT r1 AS "id" FROM "public"\.stmt_[0-9a-f]{32}\(\$1\)$/);
      expect(await queryRow(fx.manager, statement, [1], { planOnce: true })).toEqual({ id: 1 });
    } finally {
      jest.restoreAllMocks();
      for (const name of await functionsOf('fn_later')) await queryRows(admin.manager, `DROP FUNCTION ${name}`);
      await queryRows(admin.manager, 'DROP TABLE fn_later');
    }
  });
});
