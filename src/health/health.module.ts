import { Inject, Module, type OnModuleDestroy } from '@nestjs/common';
import type { Cluster, Redis } from 'ioredis';
import type { AppConfig } from '../config/app-config';
import { APP_CONFIG } from '../config/app-config';
import { HEALTH_REDIS, HealthController } from './health.controller';
import { createFailFastRedis } from './redis-connection';

@Module({
  controllers: [HealthController],
  providers: [
    { provide: HEALTH_REDIS, inject: [APP_CONFIG], useFactory: (config: AppConfig) => createFailFastRedis(config) },
  ],
})
export class HealthModule implements OnModuleDestroy {
  constructor(@Inject(HEALTH_REDIS) private readonly redis: Redis | Cluster) {}

  /** The module made the connection, so the module closes it. */
  onModuleDestroy(): void {
    this.redis.disconnect();
  }
}
