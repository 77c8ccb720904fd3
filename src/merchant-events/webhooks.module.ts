import { BullModule } from '@nestjs/bullmq';
import { Module } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '../config/app-config';
import { secretBoxProvider } from './secret-box.provider';
import { WebhookDeliveriesRepository } from './webhook-deliveries.repository';
import { WebhookDispatcher } from './webhook-dispatcher.service';
import { WebhooksProcessor, webhooksProcessorFor } from './webhooks.processor';
import { WebhooksScheduler } from './webhooks.scheduler';
import { WEBHOOKS_QUEUE } from './webhooks.constants';

/**
 * The worker's side of merchant events: dispatch and delivery on a queue of
 * their own, so sends never wait behind reconciliation jobs (nor the reverse).
 * The BullMQ connection is the one the reconciliation module sets up.
 */
@Module({
  imports: [BullModule.registerQueue({ name: WEBHOOKS_QUEUE })],
  providers: [
    WebhookDeliveriesRepository,
    secretBoxProvider,
    WebhookDispatcher,
    {
      provide: WebhooksProcessor,
      inject: [WebhookDispatcher, APP_CONFIG],
      useFactory: (dispatcher: WebhookDispatcher, config: AppConfig) => new (webhooksProcessorFor(config))(dispatcher),
    },
    WebhooksScheduler,
  ],
  // The queue, for the worker's gauges (SafetyNetGauges) to count its jobs.
  exports: [BullModule],
})
export class WebhooksModule {}
