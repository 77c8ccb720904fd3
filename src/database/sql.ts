import { QueryFailedError } from 'typeorm';
import type { EntityManager } from 'typeorm';

/**
 * Rows of a raw statement. TypeORM's postgres driver answers UPDATE and DELETE
 * with [rows, rowCount] and everything else with rows; callers want rows.
 */
export async function queryRows<T>(db: EntityManager, text: string, params: unknown[] = []): Promise<T[]> {
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
