import type { Config } from 'jest';
import { createDataSource } from '../src/database/data-source';
import { ensureDatabase } from '../src/database/ensure-database';
import { migrate } from '../src/database/migrate';
import { SUITE_DATABASE_URL, assertTestDatabase, workerDatabaseUrl } from './support/test-env';

/**
 * Creates each jest worker's test database when missing and brings its schema
 * up to date, once per run: the run's own (TEST_DATABASE_URL, worker 1 and
 * files run in band) and one beside it per further worker.
 */
export default async function globalSetup(globalConfig: { maxWorkers: Config['maxWorkers'] }): Promise<void> {
  const workers = Math.max(1, Number(globalConfig.maxWorkers) || 1);
  const urls = Array.from({ length: workers }, (_, i) => workerDatabaseUrl(SUITE_DATABASE_URL, String(i + 1)));
  for (const url of urls) assertTestDatabase(url);
  await Promise.all(urls.map(migrated));
}

async function migrated(url: string): Promise<void> {
  await ensureDatabase(url);
  const dataSource = await createDataSource({ databaseUrl: url }).initialize();
  try {
    await migrate(dataSource);
  } finally {
    await dataSource.destroy();
  }
}
