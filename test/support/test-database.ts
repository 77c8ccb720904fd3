import type { DataSource } from 'typeorm';
import { emptyTables } from './scratch-database';
import { createDataSource } from '../../src/database/data-source';
import { TEST_DATABASE_URL, assertTestDatabase } from './test-env';

/**
 * For specs of statements against the real, migrated test database: one
 * connection pool for the file, every table emptied before each test.
 * Read `db.dataSource` inside hooks and tests, once beforeAll has run.
 */
export function useTestDatabase(): { readonly dataSource: DataSource } {
  const handle = {} as { dataSource: DataSource };
  beforeAll(async () => {
    assertTestDatabase(TEST_DATABASE_URL);
    handle.dataSource = await createDataSource({ databaseUrl: TEST_DATABASE_URL }).initialize();
  });
  beforeEach(async () => {
    await emptyTables(handle.dataSource);
  });
  afterAll(async () => {
    await handle.dataSource?.destroy();
  });
  return handle;
}
