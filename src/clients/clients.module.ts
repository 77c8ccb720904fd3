import { Module } from '@nestjs/common';
import type { AppConfig } from '../config/app-config';
import { APP_CONFIG } from '../config/app-config';
import { ApiKeyGuard } from './api-key.guard';
import { ApiKeyUsage } from './api-key-usage';
import { AuthFailureLimiter } from './auth-failure-limiter';
import { ClientRateLimit } from './client-rate-limit';
import { ClientThrottlerGuard } from './client-throttler.guard';
import { ClientsRepository } from './clients.repository';
import { ClientsService } from './clients.service';

@Module({
  providers: [
    ClientsRepository,
    {
      provide: ApiKeyUsage,
      inject: [ClientsRepository, APP_CONFIG],
      useFactory: (clients: ClientsRepository, config: AppConfig) => new ApiKeyUsage(clients, config.apiKeyUsageFlushMs),
    },
    {
      provide: ClientsService,
      inject: [ClientsRepository, APP_CONFIG, ApiKeyUsage],
      useFactory: (clients: ClientsRepository, config: AppConfig, usage: ApiKeyUsage) =>
        new ClientsService(clients, config.authCache, usage),
    },
    ApiKeyGuard,
    ClientThrottlerGuard,
    {
      provide: ClientRateLimit,
      inject: [APP_CONFIG],
      useFactory: ({ rateLimit }: AppConfig) => new ClientRateLimit(rateLimit.requests, rateLimit.windowMs),
    },
    {
      provide: AuthFailureLimiter,
      inject: [APP_CONFIG],
      useFactory: ({ rateLimit }: AppConfig) => new AuthFailureLimiter(rateLimit.authFailures, rateLimit.authFailureWindowMs),
    },
  ],
  exports: [ClientsService, ApiKeyGuard, ClientThrottlerGuard, ClientRateLimit, AuthFailureLimiter],
})
export class ClientsModule {}
