import { Controller, Get, Param, Query, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '@nestjs/swagger';
import { ApiKeyGuard, CurrentClient } from '../clients/api-key.guard';
import { ClientThrottlerGuard } from '../clients/client-throttler.guard';
import type { ApiClient } from '../clients/clients.table';
import { AUTHENTICATED_ANSWERS, API_KEY_SCHEME, ApiAnswers, DATABASE_UNAVAILABLE } from '../common/openapi';
import { EventList, EventResource } from './event';
import { ListEventsQueryDto } from './events.dto';
import { EventLookupService } from './event-lookup.service';

@Controller('v1/events')
@UseGuards(ApiKeyGuard, ClientThrottlerGuard)
@ApiTags('events')
@ApiBearerAuth(API_KEY_SCHEME)
@ApiAnswers(...AUTHENTICATED_ANSWERS)
export class EventsController {
  constructor(private readonly lookup: EventLookupService) {}

  @Get(':id')
  @ApiOperation({ summary: 'Read one event: the same bytes its webhook carried' })
  @ApiAnswers(
    { status: 200, description: 'The event.', type: EventResource },
    { status: 404, description: 'No such event for this client (`resource_missing`).' },
    DATABASE_UNAVAILABLE,
  )
  get(@CurrentClient() client: ApiClient, @Param('id') id: string) {
    return this.lookup.get(client.id, id);
  }

  @Get()
  @ApiOperation({ summary: 'List events, newest first, to catch up on what webhooks carried' })
  @ApiAnswers(
    { status: 200, description: 'A page of events.', type: EventList },
    { status: 400, description: 'Bad limit, cursor or type (`parameter_invalid`).' },
    DATABASE_UNAVAILABLE,
  )
  list(@CurrentClient() client: ApiClient, @Query() query: ListEventsQueryDto) {
    return this.lookup.list(client.id, { limit: query.limit, startingAfter: query.starting_after, type: query.type });
  }
}
