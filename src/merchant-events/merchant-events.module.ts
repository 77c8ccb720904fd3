import { Module } from '@nestjs/common';
import { ClientsModule } from '../clients/clients.module';
import { LedgerModule } from '../ledger/ledger.module';
import { EventLookupService } from './event-lookup.service';
import { EventsController } from './events.controller';
import { EventsRepository } from './events.repository';

/** The API's side of merchant events: the events a client can list and read. The outbox writes are the ledger's. */
@Module({
  imports: [ClientsModule, LedgerModule],
  controllers: [EventsController],
  providers: [EventLookupService, EventsRepository],
})
export class MerchantEventsModule {}
