import { type DynamicModule, Module } from '@nestjs/common';
import type { AppConfig } from './config/app-config';
import { ConfigModule } from './config/config.module';
import { CrashPointModule } from './common/crash-point';
import { loggingModule } from './common/logging';
import { DatabaseModule } from './database/database.module';
import { MetricsModule } from './metrics/metrics.module';
import { ReconciliationModule } from './reconciliation/reconciliation.module';

/** The worker process: reconciliation, review re-checks and key expiry; no HTTP but its metrics port. */
@Module({})
export class WorkerModule {
  static forRoot(config: AppConfig): DynamicModule {
    return {
      module: WorkerModule,
      imports: [
        ConfigModule.forRoot(config),
        loggingModule(config, 'payments-worker'),
        CrashPointModule,
        DatabaseModule,
        MetricsModule.servedOn((config) => config.metrics.workerPort),
        ReconciliationModule,
      ],
    };
  }
}
