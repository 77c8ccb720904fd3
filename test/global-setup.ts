import { createDataSource } from '../src/database/data-source';
import { ensureDatabase } from '../src/database/ensure-database';
import { migrate } from '../src/database/migrate';
import { TEST_DATABASE_URL, assertTestDatabase } from './support/test-env';

/** Creates the test database when missing and brings its schema up to date, once per run. */
export default async function globalSetup(): Promise<void> {
  assertTestDatabase(TEST_DATABASE_URL);
  await ensureDatabase(TEST_DATABASE_URL);
  const dataSource = await createDataSource({ databaseUrl: TEST_DATABASE_URL }).initialize();
  try {
    await migrate(dataSource);
  } finally {
    await dataSource.destroy();
  }
}
