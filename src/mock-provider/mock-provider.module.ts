import { DynamicModule, Module } from '@nestjs/common';
import { APP_FILTER, APP_PIPE } from '@nestjs/core';
import { randomUUID } from 'node:crypto';
import { LoggerModule } from 'nestjs-pino';
import type { AppConfig } from '../config/app-config';
import { ConfigModule } from '../config/config.module';
import { MockProviderController } from './mock-provider.controller';
import { EventDelivery } from './mock-provider.delivery';
import { mockProviderValidationPipe } from './mock-provider.dto';
import { ProviderEventEmitter } from './mock-provider.emitter';
import { MockProviderErrorFilter } from './mock-provider.filter';
import { MockProviderService } from './mock-provider.service';
import { MockProviderStore } from './mock-provider.store';
import { TracingModule } from '../tracing/tracing.module';

/**
 * The stand-in payment processor. It is the root of its own process
 * (provider-main.ts), so it owns the configuration, the logger and the global
 * validation pipe and error filter.
 */
@Module({})
export class MockProviderModule {
  static forRoot(config: AppConfig): DynamicModule {
    return {
      module: MockProviderModule,
      imports: [
        ConfigModule.forRoot(config),
        TracingModule,
        LoggerModule.forRoot({
          pinoHttp: {
            name: 'mock-provider',
            level: config.logLevel,
            // The API sends X-Request-Id with each provider call: logging it as the
            // request id lets one id be followed across both processes.
            genReqId: (request) => {
              const requestId = request.headers['x-request-id'];
              return typeof requestId === 'string' && requestId !== '' ? requestId : randomUUID();
            },
          },
        }),
      ],
      controllers: [MockProviderController],
      providers: [
        {
          provide: MockProviderStore,
          useFactory: () => MockProviderStore.open(config.mockProvider.dataFile),
        },
        MockProviderService,
        ProviderEventEmitter,
        EventDelivery,
        { provide: APP_PIPE, useValue: mockProviderValidationPipe() },
        { provide: APP_FILTER, useClass: MockProviderErrorFilter },
      ],
    };
  }
}
