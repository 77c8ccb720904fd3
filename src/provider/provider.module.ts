import { Module } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '../config/app-config';
import { ProviderBreaker } from './provider-breaker';
import { ProviderClient } from './provider.client';
import { RetryBudget } from './retry-budget';

/**
 * The payment provider client; needs ConfigModule.forRoot() and MetricsModule
 * (both global) in the app. The module is a singleton however many modules
 * import it, so the retry budget and the breaker are one each per process.
 */
@Module({
  providers: [
    ProviderClient,
    ProviderBreaker,
    {
      provide: RetryBudget,
      inject: [APP_CONFIG],
      useFactory: (config: AppConfig) =>
        new RetryBudget(config.provider.retryBudget.capacity, config.provider.retryBudget.refund),
    },
  ],
  exports: [ProviderClient],
})
export class ProviderModule {}
