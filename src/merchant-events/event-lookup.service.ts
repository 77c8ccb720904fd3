import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { type EventList, type EventResource, toEventResource } from './event';
import { EVENT_ID_PATTERN, type EventType } from '../ledger/outbox';
import { eventNotFound, unknownEventCursor } from './events.errors';
import { EventsRepository } from './events.repository';

/** GET /v1/events and /v1/events/:id: a client's events and nobody else's, the way a merchant catches up. */
@Injectable()
export class EventLookupService {
  constructor(
    private readonly dataSource: DataSource,
    private readonly events: EventsRepository,
  ) {}

  async get(clientId: string, id: string): Promise<EventResource> {
    if (!EVENT_ID_PATTERN.test(id)) throw eventNotFound(id);
    const event = await this.events.findForClient(this.dataSource.manager, clientId, id);
    if (!event) throw eventNotFound(id);
    return toEventResource(event);
  }

  async list(clientId: string, page: { limit?: number; startingAfter?: string; type?: EventType }): Promise<EventList> {
    const db = this.dataSource.manager;
    if (page.startingAfter !== undefined && !(await this.events.findForClient(db, clientId, page.startingAfter))) {
      throw unknownEventCursor(page.startingAfter);
    }
    const result = await this.events.listForClient(db, clientId, {
      limit: page.limit ?? 10,
      startingAfter: page.startingAfter,
      type: page.type,
    });
    return { object: 'list', data: result.events.map(toEventResource), has_more: result.hasMore };
  }
}
