import { BullModule, getQueueToken } from '@nestjs/bullmq';
import { type DynamicModule, Module } from '@nestjs/common';
import type { Queue } from 'bullmq';
import { DataSource } from 'typeorm';
import { APP_CONFIG, type AppConfig } from './config/app-config';
import { ConfigModule } from './config/config.module';
import { bullConnection } from './common/redis-client';
import { CrashPointModule } from './common/crash-point';
import { loggingModule } from './common/logging';
import { DatabaseModule } from './database/database.module';
import { WebhooksModule } from './merchant-events/webhooks.module';
import { WEBHOOKS_QUEUE } from './merchant-events/webhooks.constants';
import { Metrics } from './metrics/metrics';
import { MetricsModule } from './metrics/metrics.module';
import { SafetyNetGauges } from './reconciliation/safety-net-gauges';
import { RECONCILIATION_QUEUE } from './reconciliation/reconciliation.constants';
import { ReconciliationModule } from './reconciliation/reconciliation.module';
import { RETENTION_QUEUE } from './retention/retention.constants';
import { RetentionModule } from './retention/retention.module';
import { TracingModule } from './tracing/tracing.module';

/**
 * The worker process: reconciliation, review re-checks, key expiry,
 * merchant webhooks and the retention prune; no HTTP but its metrics port. Every queue shares one
 * Redis connection setting (a single server or a cluster) and prefix.
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
        TracingModule,
        DatabaseModule,
        MetricsModule.servedOn((config) => config.metrics.workerPort),
        BullModule.forRootAsync({
          inject: [APP_CONFIG],
          useFactory: (config: AppConfig) => ({
            // A worker's commands wait for Redis rather than fail (BullMQ refuses
            // a client it is given with any other setting): on a cluster, for
            // as long as a failover takes.
            connection: bullConnection(config, { maxRetriesPerRequest: null }),
            prefix: config.queuePrefix,
          }),
        }),
        ReconciliationModule,
        WebhooksModule,
        RetentionModule,
      ],
      providers: [
        {
          provide: SafetyNetGauges,
          inject: [
            DataSource,
            getQueueToken(RECONCILIATION_QUEUE),
            getQueueToken(WEBHOOKS_QUEUE),
            getQueueToken(RETENTION_QUEUE),
            Metrics,
            APP_CONFIG,
          ],
          useFactory: (dataSource: DataSource, reconciliation: Queue, webhooks: Queue, retention: Queue, metrics: Metrics, config: AppConfig) =>
            new SafetyNetGauges(dataSource, [reconciliation, webhooks, retention], metrics, config.metrics.gaugeIntervalMs),
        },
      ],
    };
  }
}
