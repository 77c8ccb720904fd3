import { CallHandler, ExecutionContext, Injectable, Logger, NestInterceptor } from '@nestjs/common';
import { setTimeout as delay } from 'node:timers/promises';
import type { Request } from 'express';
import type { Observable } from 'rxjs';
import type { AppConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import { MockProviderError, MockProviderErrorCode } from './mock-provider.errors';

/**
 * PROVIDER_LATENCY_MS and PROVIDER_FAILURE_RATE for load and chaos runs, and the
 * caller's deadline. It runs before validation and the service, so an injected
 * failure or a request past its deadline records nothing and does not count as
 * a call for the tokens that refuse their first calls.
 */
@Injectable()
export class FaultInjectionInterceptor implements NestInterceptor {
  private readonly logger = new Logger(FaultInjectionInterceptor.name);

  constructor(@InjectConfig() private readonly config: AppConfig) {}

  async intercept(context: ExecutionContext, next: CallHandler): Promise<Observable<unknown>> {
    const arrivedAt = performance.now();
    const { latencyMs, failureRate } = this.config.mockProvider;
    if (latencyMs > 0) await delay(latencyMs);
    const waitMs = callerWaitMs(context.switchToHttp().getRequest<Request>());
    // The caller has stopped listening: work done now would be for nobody, and a
    // charge recorded now would surface only later, through reconciliation.
    if (waitMs !== undefined && performance.now() - arrivedAt >= waitMs) {
      this.logger.log({ msg: 'caller stopped waiting; request dropped before any work', waitMs });
      throw new MockProviderError(
        MockProviderErrorCode.DeadlineExceeded,
        `The caller stopped waiting after ${waitMs} ms, before the work started`,
      );
    }
    if (Math.random() < failureRate) {
      throw new MockProviderError(
        MockProviderErrorCode.ServiceUnavailable,
        'Injected failure (PROVIDER_FAILURE_RATE)',
      );
    }
    return next.handle();
  }
}

/**
 * X-Request-Deadline-Ms: how long the caller waits for this reply, counted from
 * arrival. A value we cannot read is ignored, as a real service ignores a header
 * it does not understand.
 */
function callerWaitMs(request: Request): number | undefined {
  const value = request.header('X-Request-Deadline-Ms')?.trim();
  return value !== undefined && /^\d+$/.test(value) ? Number(value) : undefined;
}
