import { Controller, Get, Param, Query, UseGuards } from '@nestjs/common';
import { ApiKeyGuard, CurrentClient } from '../clients/api-key.guard';
import { ClientThrottlerGuard } from '../clients/client-throttler.guard';
import type { ApiClient } from '../clients/clients.table';
import { ListEventsQueryDto } from './events.dto';
import { EventLookupService } from './event-lookup.service';

@Controller('v1/events')
@UseGuards(ApiKeyGuard, ClientThrottlerGuard)
export class EventsController {
  constructor(private readonly lookup: EventLookupService) {}

  @Get(':id')
  get(@CurrentClient() client: ApiClient, @Param('id') id: string) {
    return this.lookup.get(client.id, id);
  }

  @Get()
  list(@CurrentClient() client: ApiClient, @Query() query: ListEventsQueryDto) {
    return this.lookup.list(client.id, { limit: query.limit, startingAfter: query.starting_after, type: query.type });
  }
}
