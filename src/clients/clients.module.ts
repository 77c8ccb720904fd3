import { Module } from '@nestjs/common';
import { ThrottlerModule } from '@nestjs/throttler';
import type { AppConfig } from '../config/app-config';
import { APP_CONFIG } from '../config/app-config';
import { ApiKeyGuard } from './api-key.guard';
import { AuthFailureLimiter } from './auth-failure-limiter';
import { ClientThrottlerGuard } from './client-throttler.guard';
import { ClientsRepository } from './clients.repository';
import { ClientsService } from './clients.service';
import { SlidingWindowStorage } from './sliding-window-storage';

@Module({
  imports: [
    ThrottlerModule.forRootAsync({
      inject: [APP_CONFIG],
      useFactory: (config: AppConfig) => ({
        throttlers: [{ ttl: config.rateLimit.windowMs, limit: config.rateLimit.requests }],
        storage: new SlidingWindowStorage(),
      }),
    }),
  ],
  providers: [
    ClientsRepository,
    {
      provide: ClientsService,
      inject: [ClientsRepository, APP_CONFIG],
      useFactory: (clients: ClientsRepository, config: AppConfig) => new ClientsService(clients, config.authCache),
    },
    ApiKeyGuard,
    ClientThrottlerGuard,
    {
      provide: AuthFailureLimiter,
      inject: [APP_CONFIG],
      useFactory: ({ rateLimit }: AppConfig) => new AuthFailureLimiter(rateLimit.authFailures, rateLimit.authFailureWindowMs),
    },
  ],
  exports: [ClientsService, ApiKeyGuard, ClientThrottlerGuard, AuthFailureLimiter],
})
export class ClientsModule {}
