import { BullModule } from '@nestjs/bullmq';
import { type DynamicModule, Module } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from './config/app-config';
import { ConfigModule } from './config/config.module';
import { CrashPointModule } from './common/crash-point';
import { loggingModule } from './common/logging';
import { DatabaseModule } from './database/database.module';
import { WebhooksModule } from './merchant-events/webhooks.module';
import { MetricsModule } from './metrics/metrics.module';
import { ReconciliationModule } from './reconciliation/reconciliation.module';

/**
 * The worker process: reconciliation, review re-checks, key expiry and
 * merchant webhooks; no HTTP but its metrics port. Every queue shares one
 * Redis connection setting and prefix.
 */
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
        BullModule.forRootAsync({
          inject: [APP_CONFIG],
          useFactory: ({ redisUrl, queuePrefix }: AppConfig) => ({ connection: { url: redisUrl }, prefix: queuePrefix }),
        }),
        ReconciliationModule,
        WebhooksModule,
      ],
    };
  }
}
