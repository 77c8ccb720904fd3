import { Module } from '@nestjs/common';
import type { AppConfig } from '../config/app-config';
import { APP_CONFIG } from '../config/app-config';
import { HEALTH_REDIS, HealthController } from './health.controller';
import { createFailFastRedis } from './redis-connection';

@Module({
  controllers: [HealthController],
  providers: [
    { provide: HEALTH_REDIS, inject: [APP_CONFIG], useFactory: (config: AppConfig) => createFailFastRedis(config.redisUrl) },
  ],
})
export class HealthModule {}
