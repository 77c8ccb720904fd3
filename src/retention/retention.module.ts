import { BullModule } from '@nestjs/bullmq';
import { Module } from '@nestjs/common';
import { ClientsRepository } from '../clients/clients.repository';
import { EventsRepository } from '../merchant-events/events.repository';
import { ProcessedMessagesRepository } from '../provider-events/processed-messages.repository';
import { RETENTION_QUEUE } from './retention.constants';
import { RetentionProcessor } from './retention.processor';
import { RetentionScheduler } from './retention.scheduler';
import { RetentionService } from './retention.service';

/**
 * The worker's retention prune, on a queue of its own: a long run never takes
 * a reconciliation or webhook slot, nor a turn of the reconciliation limiter.
 */
@Module({
  imports: [BullModule.registerQueue({ name: RETENTION_QUEUE })],
  providers: [ClientsRepository, EventsRepository, ProcessedMessagesRepository, RetentionService, RetentionProcessor, RetentionScheduler],
  // The queue, for the worker's gauges (SafetyNetGauges) to count its jobs.
  exports: [BullModule],
})
export class RetentionModule {}
