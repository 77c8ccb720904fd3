import { Injectable, Module, type OnApplicationShutdown } from '@nestjs/common';
import { shutdownTracing } from './tracing';

/**
 * Flushes the spans at shutdown: Nest calls this after the HTTP server has
 * closed and the in-flight requests (and their spans) have ended.
 */
@Injectable()
export class TracingShutdown implements OnApplicationShutdown {
  onApplicationShutdown(): Promise<void> {
    return shutdownTracing();
  }
}

@Module({ providers: [TracingShutdown] })
export class TracingModule {}
