import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type { AppConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import { type EventList, type EventResource, toEventResource } from './event';
import { EVENT_ID_PATTERN, type EventType, eventIdTime, retentionCutoff } from '../ledger/outbox';
import { eventNotFound, unknownEventCursor } from './events.errors';
import { EventsRepository } from './events.repository';

/** GET /v1/events and /v1/events/:id: a client's events and nobody else's, the way a merchant catches up. */
@Injectable()
export class EventLookupService {
  constructor(
    private readonly dataSource: DataSource,
    private readonly events: EventsRepository,
    @InjectConfig() private readonly config: AppConfig,
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
      // A merchant paging back reached events the prune deleted while it
      // paged: everything older than its cursor is past the retention too.
      if (this.pastRetention(page.startingAfter)) return { object: 'list', data: [], has_more: false };
      throw unknownEventCursor(page.startingAfter);
    }
    const result = await this.events.listForClient(db, clientId, {
      limit: page.limit ?? 10,
      startingAfter: page.startingAfter,
      type: page.type,
    });
    return { object: 'list', data: result.events.map(toEventResource), has_more: result.hasMore };
  }

  /** An event id made longer than EVENTS_RETENTION_DAYS ago: its event, if there was one, may have been pruned. */
  private pastRetention(id: string): boolean {
    return EVENT_ID_PATTERN.test(id) && eventIdTime(id) < retentionCutoff(this.config.retention.eventsDays);
  }
}
