import type { DataSource } from 'typeorm';
import { apiKeysTable } from '../../src/clients/api-keys.table';
import { apiClientsTable } from '../../src/clients/clients.table';
import { TABLES } from './tables';

/** Every table but the directory of clients and their keys, read by API key before any client is known. */
export const CLIENT_TABLES = TABLES.filter((table) => table !== apiClientsTable && table !== apiKeysTable).map((table) => table.name);

/**
 * Rebuilds every client-keyed table of the migrated (and empty) schema as a
 * table hash-partitioned by client_id, with the same columns, checks,
 * defaults, keys, indexes, foreign keys and triggers, each under its own
 * name: `<table>_p0` … are its partitions. The proof that the hot statements
 * stay on one client's rows (test/database/sharding.db-spec.ts), and the
 * bench's measure of what partitioning costs (docs/scaling.md).
 */
export async function partitionByClient(dataSource: DataSource, partitions: number): Promise<void> {
  const tables = CLIENT_TABLES;
  const [{ partitioned }] = (await dataSource.query(
    `SELECT count(*)::int AS partitioned FROM pg_partitioned_table WHERE partrelid::regclass::text = ANY($1)`,
    [tables],
  )) as { partitioned: number }[];
  // Rebuilt once: a database partitioned before keeps its partitions.
  if (partitioned > 0) return;
  const constraintsOf = (types: string) =>
    dataSource.query(
      `SELECT conrelid::regclass::text AS "table", conname AS name, pg_get_constraintdef(oid) AS definition
         FROM pg_constraint WHERE conrelid::regclass::text = ANY($1) AND contype = ANY($2)
        ORDER BY contype DESC`,
      [tables, types.split('')],
    ) as Promise<{ table: string; name: string; definition: string }[]>;
  const keys = await constraintsOf('pu');
  const foreignKeys = await constraintsOf('f');
  const indexes = (await dataSource.query(
    `SELECT indexdef FROM pg_indexes
      WHERE schemaname = 'public' AND tablename = ANY($1)
        AND indexname NOT IN (SELECT conname FROM pg_constraint WHERE contype IN ('p', 'u'))`,
    [tables],
  )) as { indexdef: string }[];
  const triggers = (await dataSource.query(
    `SELECT pg_get_triggerdef(oid) AS definition FROM pg_trigger WHERE NOT tgisinternal AND tgrelid::regclass::text = ANY($1)`,
    [tables],
  )) as { definition: string }[];

  await dataSource.transaction(async (db) => {
    for (const table of tables) {
      await db.query(
        `CREATE TABLE ${table}_by_client (LIKE ${table} INCLUDING DEFAULTS INCLUDING CONSTRAINTS) PARTITION BY HASH (client_id)`,
      );
    }
    await db.query(`DROP TABLE ${tables.join(', ')} CASCADE`);
    for (const table of tables) {
      await db.query(`ALTER TABLE ${table}_by_client RENAME TO ${table}`);
      for (let remainder = 0; remainder < partitions; remainder++) {
        await db.query(
          `CREATE TABLE ${table}_p${remainder} PARTITION OF ${table} FOR VALUES WITH (MODULUS ${partitions}, REMAINDER ${remainder})`,
        );
      }
    }
    for (const { table, name, definition } of [...keys, ...foreignKeys]) {
      await db.query(`ALTER TABLE ${table} ADD CONSTRAINT ${name} ${definition}`);
    }
    for (const { indexdef } of indexes) await db.query(indexdef);
    for (const { definition } of triggers) await db.query(definition);
  });
}
