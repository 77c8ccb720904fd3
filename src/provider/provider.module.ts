import { Module } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '../config/app-config';
import { ProviderBreaker } from './provider-breaker';
import { ProviderClient } from './provider.client';
import { RetryBudgets } from './retry-budget';

/**
 * The payment provider client; needs ConfigModule.forRoot() and MetricsModule
 * (both global) in the app. The module is a singleton however many modules
 * import it, so the retry budgets and the breaker are one set per process,
 * each scoped by API client inside.
 */
@Module({
  providers: [
    ProviderClient,
    ProviderBreaker,
    {
      provide: RetryBudgets,
      inject: [APP_CONFIG],
      useFactory: ({ provider }: AppConfig) =>
        new RetryBudgets(provider.retryBudget.capacity, provider.retryBudget.refund, provider.trackedClients),
    },
  ],
  exports: [ProviderClient],
})
export class ProviderModule {}
