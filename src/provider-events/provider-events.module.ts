import { Module } from '@nestjs/common';
import { LedgerModule } from '../ledger/ledger.module';
import { ProcessedMessagesRepository } from './processed-messages.repository';
import { ProviderEventsController } from './provider-events.controller';
import { ProviderEventsService } from './provider-events.service';

/** POST /v1/provider/events: verify, record as processed, apply through the ledger. */
@Module({
  imports: [LedgerModule],
  controllers: [ProviderEventsController],
  providers: [ProcessedMessagesRepository, ProviderEventsService],
})
export class ProviderEventsModule {}
