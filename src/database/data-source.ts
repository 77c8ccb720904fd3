import { DataSource, DataSourceOptions } from 'typeorm';
import { type AppConfig, DATABASE_POOL_DEFAULTS } from '../config/app-config';
import { migrations } from '../../migrations';

/**
 * One options builder for the API, the worker, the migration command and the
 * tests. The schema changes only through migrations: synchronize is off
 * everywhere, tests included.
 */
export const MIGRATIONS_TABLE = 'typeorm_migrations';

/**
 * Every statement a request makes is short; a stuck one must not hold a
 * pooled connection (or a row lock) for ever. pg sends these as startup
 * parameters of each connection. A transaction-pooling PgBouncer must ignore
 * them there (it refuses any startup parameter it does not know) and set them
 * on its own server connections instead (connect_query): see docs/scaling.md.
 */
export const SESSION_TIMEOUTS = { statement_timeout: 10_000, idle_in_transaction_session_timeout: 10_000 } as const;

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
      ...SESSION_TIMEOUTS,
      // Read by queryRows (database/sql.ts), not by pg.
      preparedStatements: pool.preparedStatements,
    },
  };
}

export function createDataSource(config: Parameters<typeof dataSourceOptions>[0]): DataSource {
  return new DataSource(dataSourceOptions(config));
}
