import { Module } from '@nestjs/common';
import { ClientsModule } from '../clients/clients.module';
import { LedgerModule } from '../ledger/ledger.module';
import { EventLookupService } from './event-lookup.service';
import { EventsController } from './events.controller';
import { EventsRepository } from './events.repository';
import { secretBoxProvider } from './secret-box.provider';
import { WebhookDeliveriesRepository } from './webhook-deliveries.repository';
import { WebhookEndpointsController } from './webhook-endpoints.controller';
import { WebhookEndpointsRepository } from './webhook-endpoints.repository';
import { WebhookEndpointsService } from './webhook-endpoints.service';

/**
 * The API's side of merchant events: the events a client can list and read,
 * and the webhook endpoints it manages. The outbox writes are the ledger's.
 */
@Module({
  imports: [ClientsModule, LedgerModule],
  controllers: [EventsController, WebhookEndpointsController],
  providers: [
    EventLookupService,
    EventsRepository,
    WebhookEndpointsService,
    WebhookEndpointsRepository,
    WebhookDeliveriesRepository,
    secretBoxProvider,
  ],
})
export class MerchantEventsModule {}
