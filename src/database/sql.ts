import type { Pool } from 'pg';
import { QueryFailedError } from 'typeorm';
import type { EntityManager } from 'typeorm';
import type { PostgresDriver } from 'typeorm/driver/postgres/PostgresDriver.js';

/**
 * Rows of a raw statement. One on the data source's own manager, outside any
 * transaction, goes straight to its pool: through TypeORM, each makes,
 * connects and releases a QueryRunner and broadcasts query events nobody
 * listens to: about a fifth more of this process's CPU per statement
 * (measured by scripts/statement-bench.ts, a one-off now in git history only).
 * As through TypeORM, a statement's failure is wrapped in QueryFailedError
 * (a failure to get a connection is not), so that it is read
 * (isUniqueViolation, the envelope) and logged (never its parameters) the
 * same. Through any other manager's `query`, TypeORM's postgres driver
 * answers UPDATE and DELETE with [rows, rowCount] and everything else with
 * rows; callers want rows.
 */
export async function queryRows<T>(db: EntityManager, text: string, params: unknown[] = []): Promise<T[]> {
  if (isDataSourceManager(db)) {
    // Not pool.query: it discards the connection after any failed statement,
    // a unique violation included. Here only a failure that ended the session
    // does: a FATAL from the server (it is shutting down, or terminated this
    // backend) or a dropped socket, anything but an ERROR of the statement.
    const connection = await poolOf(db).connect();
    let broken: Error | undefined;
    // While it is held, the pool no longer listens for its errors: one the
    // server sends meanwhile (a shutdown's FATAL, a dropped socket) fails
    // the statement, and must not end the process as an unhandled 'error'
    // event. TypeORM listens the same way for a connection it holds.
    connection.on('error', ignoreHeldConnectionError);
    try {
      return (await connection.query(text, params)).rows as T[];
    } catch (error) {
      if ((error as { severity?: unknown }).severity !== 'ERROR') broken = error as Error;
      throw new QueryFailedError(text, params, error as Error);
    } finally {
      connection.off('error', ignoreHeldConnectionError);
      connection.release(broken);
    }
  }
  const result: unknown = await db.query(text, params);
  if (
    Array.isArray(result) &&
    result.length === 2 &&
    Array.isArray(result[0]) &&
    typeof result[1] === 'number'
  ) {
    return result[0] as T[];
  }
  return result as T[];
}

/**
 * The data source's own manager, outside any transaction; any other (a
 * transaction's, or a stand-in of a test or the bench's floor) is asked
 * through its own `query`.
 */
function isDataSourceManager(db: EntityManager): boolean {
  return (db.connection as EntityManager['connection'] | undefined)?.manager === db;
}

/** The statement on the connection fails with the same error, and is answered from that. */
function ignoreHeldConnectionError(): void {}

function poolOf(db: EntityManager): Pool {
  return (db.connection.driver as PostgresDriver).master as Pool;
}

export async function queryRow<T>(db: EntityManager, text: string, params: unknown[] = []): Promise<T | undefined> {
  const rows = await queryRows<T>(db, text, params);
  return rows[0];
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
 * The parameters of one statement, numbered in the order they are added.
 * Each fragment of a statement adds its own values and writes the `$n` it
 * gets back, so no fragment depends on where another's parameters sit, and a
 * fragment that gains one shifts nobody else's.
 */
export class Params {
  readonly values: unknown[] = [];

  /** The placeholder of `value`, with a cast when one is given (`$4::text`). */
  add(value: unknown, cast?: string): string {
    this.values.push(value);
    return cast === undefined ? `$${this.values.length}` : `$${this.values.length}::${cast}`;
  }
}

