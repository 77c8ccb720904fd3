import { Client } from 'pg';
import { createDataSource } from '../src/database/data-source';
import { migrate } from '../src/database/migrate';
import { TEST_DATABASE_URL, assertTestDatabase } from './support/test-env';

/** Creates the test database when missing and brings its schema up to date, once per run. */
export default async function globalSetup(): Promise<void> {
  assertTestDatabase(TEST_DATABASE_URL);
  const url = new URL(TEST_DATABASE_URL);
  const name = url.pathname.slice(1);
  const admin = new Client({ connectionString: Object.assign(new URL(url), { pathname: '/postgres' }).toString() });
  await admin.connect();
  try {
    const exists = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (exists.rowCount === 0) await admin.query(`CREATE DATABASE "${name.replace(/"/g, '""')}"`);
  } finally {
    await admin.end();
  }
  const dataSource = await createDataSource({ databaseUrl: TEST_DATABASE_URL }).initialize();
  try {
    await migrate(dataSource);
  } finally {
    await dataSource.destroy();
  }
}
