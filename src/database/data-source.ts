import { DataSource, DataSourceOptions } from 'typeorm';
import type { AppConfig } from '../config/app-config';
import { migrations } from '../../migrations';

/**
 * One options builder for the API, the worker, the migration command and the
 * tests. The schema changes only through migrations: synchronize is off
 * everywhere, tests included.
 */
export function dataSourceOptions(config: Pick<AppConfig, 'databaseUrl'>): DataSourceOptions {
  return {
    type: 'postgres',
    url: config.databaseUrl,
    synchronize: false,
    migrationsRun: false,
    migrations,
    migrationsTableName: 'typeorm_migrations',
    // Every statement a request makes is short; a stuck one must not hold a
    // pooled connection (or a row lock) for ever.
    extra: { max: 20, statement_timeout: 10_000, idle_in_transaction_session_timeout: 10_000 },
  };
}

export function createDataSource(config: Pick<AppConfig, 'databaseUrl'>): DataSource {
  return new DataSource(dataSourceOptions(config));
}
