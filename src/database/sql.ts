import { createHash } from 'node:crypto';
import type { Pool, PoolClient, QueryConfig } from 'pg';
import { QueryFailedError } from 'typeorm';
import type { EntityManager } from 'typeorm';
import type { PostgresDriver } from 'typeorm/driver/postgres/PostgresDriver.js';
import { RetryableQueryError } from '../common/retryable-query-error';
import type { PreparedStatements } from '../config/app-config';
import { endsSession, holdConnection } from './held-connection';
import { StatementFunctions } from './statement-functions';

/**
 * Rows of a raw statement, run on the connection `db` stands for: the
 * data source's own manager outside any transaction takes one from the pool
 * for the statement; a transaction's manager runs it on the transaction's
 * connection. Both go to pg directly: through TypeORM, each statement makes,
 * connects and releases a QueryRunner and broadcasts query events nobody
 * listens to (about a fifth more of this process's CPU per statement), and
 * TypeORM cannot name a statement (see statementName). As through TypeORM, a
 * statement's failure is wrapped in QueryFailedError (a failure to get a
 * connection is not), so that it is read (isUniqueViolation, the envelope)
 * and logged (never its parameters) the same.
 */
export async function queryRows<T>(
  db: EntityManager,
  text: string,
  params: unknown[] = [],
  options: StatementOptions = {},
): Promise<T[]> {
  const query: QueryConfig = { text, values: params };
  if (options.planOnce) {
    const prepared = preparedStatementsOf(db);
    if (prepared === 'named') query.name = statementName(text);
    else if (prepared === 'functions') query.text = statementFunctionsOf(db).callFor(text) ?? text;
  }
  if (isDataSourceManager(db) || db.queryRunner) {
    try {
      return await queryOnConnection<T>(db, query, text);
    } catch (error) {
      if (query.text === text || !isUndefinedFunction(error)) throw error;
      // The statement's function was dropped under this process (see
      // docs/scaling.md): from now on the statement is sent as it is, and its
      // function made again. On the pool nothing else ran in the failed
      // statement's transaction, so it runs again at once; in a transaction,
      // which the failure aborted, it fails, as one that may be sent again.
      statementFunctionsOf(db).forget(text);
      if (isDataSourceManager(db)) return queryOnPool<T>(poolOf(db), { text, values: params }, text);
      throw new RetryableQueryError(text, params, (error as QueryFailedError).driverError);
    }
  }
  // A stand-in of a test, with a `query` of its own. TypeORM's answers
  // UPDATE and DELETE with [rows, rowCount], and everything else with rows.
  const result: unknown = await db.query(text, params);
  if (Array.isArray(result) && result.length === 2 && Array.isArray(result[0]) && typeof result[1] === 'number') {
    return result[0] as T[];
  }
  return result as T[];
}

/** On the pool, or on the transaction's connection; `text` as in queryOnPool. */
async function queryOnConnection<T>(db: EntityManager, query: QueryConfig, text: string): Promise<T[]> {
  if (isDataSourceManager(db)) return queryOnPool<T>(poolOf(db), query, text);
  const connection = (await db.queryRunner!.connect()) as PoolClient;
  try {
    return (await connection.query(query)).rows as T[];
  } catch (error) {
    throw new QueryFailedError(text, query.values, error as Error);
  }
}

/** `text`: the statement as the caller wrote it, for its error (the query may run it through its function). */
async function queryOnPool<T>(pool: Pool, query: QueryConfig, text: string): Promise<T[]> {
  const held = await holdConnection(pool);
  let broken: Error | undefined;
  try {
    return (await held.connection.query(query)).rows as T[];
  } catch (error) {
    if (endsSession(error)) broken = error as Error;
    throw new QueryFailedError(text, query.values, error as Error);
  } finally {
    held.release(broken);
  }
}

/**
 * The data source's own manager, outside any transaction; any other (a
 * transaction's, or a stand-in of a test) is asked through its own
 * connection.
 */
function isDataSourceManager(db: EntityManager): boolean {
  return (db.connection as EntityManager['connection'] | undefined)?.manager === db;
}


function poolOf(db: EntityManager): Pool {
  return (db.connection.driver as PostgresDriver).master as Pool;
}

/**
 * How a statement may be run. `planOnce`: every table it reads, it reaches
 * through the one index that can serve it (a row by its key: see the
 * migration OneIndexPerLookup), so a plan made for any values is the plan
 * for all of them. Such a statement is prepared once per connection, when
 * the data source prepares statements (DATABASE_PREPARED_STATEMENTS, see
 * dataSourceOptions), and pg afterwards sends only its name and values;
 * after five runs Postgres keeps one generic plan for it and stops planning
 * it (plan_cache_mode auto, its default). Parsing and planning the same
 * statements again was about two thirds of the database's time per payment.
 *
 * Any other statement is sent unnamed: parsed and planned for its values at
 * every run. A list, a sweep or a batch is, since its best plan depends on
 * the values and the tables' sizes, and a generic plan made while a table
 * was small would be kept for the life of the connection.
 * test/plan-once.e2e-spec.ts checks every statement the service prepares:
 * each lookup has one index that can serve it.
 *
 * Not by name behind a transaction-pooling PgBouncer, which hands each
 * transaction any server connection: one that never saw the statement
 * prepared. There the statement runs through a server-side function instead
 * (DATABASE_PREPARED_STATEMENTS=functions, see StatementFunctions), whose
 * plans every server connection keeps.
 */
export interface StatementOptions {
  planOnce?: boolean;
}

/**
 * More distinct texts than this are not named (nor made functions).
 * Statements are built from fixed fragments (their values are parameters),
 * so a process has a few dozen; the bound keeps a statement whose text did
 * vary from filling every connection's memory with plans used once.
 */
const MAX_NAMED_STATEMENTS = 500;
const statementNames = new Map<string, string>();

function preparedStatementsOf(db: EntityManager): PreparedStatements {
  const options = db.connection?.options as { extra?: { preparedStatements?: PreparedStatements } } | undefined;
  return options?.extra?.preparedStatements ?? 'off';
}

/**
 * The name `text` is prepared under: a hash of the text, so that a name
 * means one text in every process. Numbered by first use, `s3` would be one
 * statement here and another in the next process; behind a
 * transaction-pooling bouncer that was told to carry named statements (see
 * DATABASE_PREPARED_STATEMENTS), a server connection holding another
 * process's `s3` would run that statement with this one's values. By text,
 * it runs this very statement or fails (`prepared statement … does not
 * exist`).
 */
function statementName(text: string): string | undefined {
  let name = statementNames.get(text);
  if (name === undefined && statementNames.size < MAX_NAMED_STATEMENTS) {
    name = `s_${createHash('sha256').update(text).digest('hex').slice(0, 32)}`;
    statementNames.set(text, name);
  }
  return name;
}

const functionsByPool = new WeakMap<Pool, StatementFunctions>();

/** The statement functions of `db`'s pool (see StatementFunctions). */
export function statementFunctionsOf(db: EntityManager): StatementFunctions {
  const pool = poolOf(db);
  let functions = functionsByPool.get(pool);
  if (functions === undefined) {
    functions = new StatementFunctions(pool, MAX_NAMED_STATEMENTS);
    functionsByPool.set(pool, functions);
  }
  return functions;
}

/** Every statement this process has prepared so far (for the spec that checks their plans). */
export function preparedStatementTexts(): string[] {
  return [...statementNames.keys()];
}

export async function queryRow<T>(
  db: EntityManager,
  text: string,
  params: unknown[] = [],
  options: StatementOptions = {},
): Promise<T | undefined> {
  const rows = await queryRows<T>(db, text, params, options);
  return rows[0];
}

/** 42883 undefined_function, raised through queryRows. */
function isUndefinedFunction(error: unknown): boolean {
  return error instanceof QueryFailedError && (error.driverError as { code?: string }).code === '42883';
}

/**
 * True when the error is a unique violation of the named constraint or index,
 * raised through TypeORM (which wraps the driver's error) or by pg itself.
 */
export function isUniqueViolation(error: unknown, constraint: string): boolean {
  const cause: unknown = error instanceof QueryFailedError ? error.driverError : error;
  if (typeof cause !== 'object' || cause === null) return false;
  const { code, constraint: violated } = cause as { code?: string; constraint?: string };
  return code === '23505' && violated === constraint;
}

/**
 * A LIMIT written into a statement's text rather than passed as a parameter:
 * a positive integer, nothing else. A batch size is fixed for the life of a
 * process, so its literal costs one statement text, and every plan knows
 * the batch's size; a LIMIT parameter in a generic plan (see
 * StatementOptions) is planned as a tenth of the rows: a prune's batch of
 * 1,000 joined back to its table was planned as a hash join over the
 * client's whole table.
 */
export function limitLiteral(limit: number): string {
  if (!Number.isSafeInteger(limit) || limit < 1) throw new Error(`a LIMIT must be a positive integer (got ${limit})`);
  return String(limit);
}

/**
 * The parameters of one statement, numbered in the order they are added.
 * Each fragment of a statement adds its own values and writes the `$n` it
 * gets back, so no fragment depends on where another's parameters sit, and a
 * fragment that gains one shifts nobody else's.
 */
export class Params {
  readonly values: unknown[] = [];

  /**
   * The placeholder of `value`, with a cast when one is given (`$4::text`).
   * A value assigned to a column whose type is a domain is cast to the
   * domain's base type (unsized: `text`, not `character(3)`, which would
   * truncate), so that the domain's rule runs in the statement rather than
   * while the parameter is decoded (see docs/design.md, "Tables and
   * statements").
   */
  add(value: unknown, cast?: string): string {
    this.values.push(value);
    return cast === undefined ? `$${this.values.length}` : `$${this.values.length}::${cast}`;
  }
}

