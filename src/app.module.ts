import { type DynamicModule, Module } from '@nestjs/common';
import type { AppConfig } from './config/app-config';
import { ConfigModule } from './config/config.module';
import { CrashPointModule } from './common/crash-point';
import { loggingModule } from './common/logging';
import { DatabaseModule } from './database/database.module';
import { HealthModule } from './health/health.module';
import { MerchantEventsModule } from './merchant-events/merchant-events.module';
import { MetricsModule } from './metrics/metrics.module';
import { PaymentsModule } from './payments/payments.module';
import { ProviderEventsModule } from './provider-events/provider-events.module';
import { RefundsModule } from './refunds/refunds.module';
import { TracingModule } from './tracing/tracing.module';

/** The payments API process. */
@Module({})
export class AppModule {
  static forRoot(config: AppConfig): DynamicModule {
    return {
      module: AppModule,
      imports: [
        ConfigModule.forRoot(config),
        loggingModule(config, 'payments-api'),
        CrashPointModule,
        DatabaseModule,
        PaymentsModule,
        RefundsModule,
        MerchantEventsModule,
        ProviderEventsModule,
        HealthModule,
        MetricsModule.servedOn((config) => config.metrics.apiPort),
        TracingModule,
      ],
    };
  }
}
