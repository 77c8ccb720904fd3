import { CallHandler, Injectable, NestInterceptor } from '@nestjs/common';
import { setTimeout as delay } from 'node:timers/promises';
import type { Observable } from 'rxjs';
import type { AppConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import { MockProviderError, MockProviderErrorCode } from './mock-provider.errors';

/**
 * PROVIDER_LATENCY_MS and PROVIDER_FAILURE_RATE for load and chaos runs. It runs
 * before validation and the service, so an injected failure records nothing and
 * does not count as a call for the tokens that refuse their first calls.
 */
@Injectable()
export class FaultInjectionInterceptor implements NestInterceptor {
  constructor(@InjectConfig() private readonly config: AppConfig) {}

  async intercept(_context: unknown, next: CallHandler): Promise<Observable<unknown>> {
    const { latencyMs, failureRate } = this.config.mockProvider;
    if (latencyMs > 0) await delay(latencyMs);
    if (Math.random() < failureRate) {
      throw new MockProviderError(
        MockProviderErrorCode.ServiceUnavailable,
        'Injected failure (PROVIDER_FAILURE_RATE)',
      );
    }
    return next.handle();
  }
}
