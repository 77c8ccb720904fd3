import { TypeOrmModule } from '@nestjs/typeorm';
import { DataSource, type DataSourceOptions } from 'typeorm';
import type { AppConfig } from '../config/app-config';
import { APP_CONFIG } from '../config/app-config';
import { dataSourceOptions } from './data-source';
import { guardPoolConnections } from './pool-guard';

/** The Postgres connection pool, shared by every feature through the DataSource. */
export const DatabaseModule = TypeOrmModule.forRootAsync({
  inject: [APP_CONFIG],
  useFactory: (config: AppConfig) => dataSourceOptions(config),
  dataSourceFactory: async (options?: DataSourceOptions) => guardPoolConnections(await new DataSource(options!).initialize()),
});
