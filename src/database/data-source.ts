import { DataSource, DataSourceOptions } from 'typeorm';
import { type AppConfig, DATABASE_POOL_DEFAULTS } from '../config/app-config';
import { migrations } from '../../migrations';

/**
 * One options builder for the API, the worker, the migration command and the
 * tests. The schema changes only through migrations: synchronize is off
 * everywhere, tests included.
 */
export const MIGRATIONS_TABLE = 'typeorm_migrations';

export function dataSourceOptions(
  config: Pick<AppConfig, 'databaseUrl'> & Partial<Pick<AppConfig, 'databasePool'>>,
): DataSourceOptions {
  const pool = config.databasePool ?? DATABASE_POOL_DEFAULTS;
  return {
    type: 'postgres',
    url: config.databaseUrl,
    synchronize: false,
    migrationsRun: false,
    migrations,
    migrationsTableName: MIGRATIONS_TABLE,
    extra: {
      max: pool.size,
      // With every connection busy, a request waits this long for one and then
      // gets a 503 (the driver's "timeout exceeded when trying to connect"),
      // rather than queueing for ever behind a stuck database.
      connectionTimeoutMillis: pool.acquireTimeoutMs,
      // Every statement a request makes is short; a stuck one must not hold a
      // pooled connection (or a row lock) for ever.
      statement_timeout: 10_000,
      idle_in_transaction_session_timeout: 10_000,
    },
  };
}

export function createDataSource(config: Parameters<typeof dataSourceOptions>[0]): DataSource {
  return new DataSource(dataSourceOptions(config));
}
