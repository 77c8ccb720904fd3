import { type DynamicModule, Global, Module } from '@nestjs/common';
import { type AppConfig, APP_CONFIG } from '../config/app-config';
import { Metrics } from './metrics';
import { MetricsServer } from './metrics.server';

/**
 * The process's metrics, injectable everywhere. A process that is scraped
 * imports MetricsModule.servedOn(its port); one that is not (the operator
 * command) imports MetricsModule alone.
 */
@Global()
@Module({ providers: [Metrics], exports: [Metrics] })
export class MetricsModule {
  static servedOn(port: (config: AppConfig) => number): DynamicModule {
    return {
      module: MetricsModule,
      providers: [
        {
          provide: MetricsServer,
          inject: [Metrics, APP_CONFIG],
          useFactory: (metrics: Metrics, config: AppConfig) => new MetricsServer(metrics, port(config)),
        },
      ],
      exports: [MetricsServer],
    };
  }
}
