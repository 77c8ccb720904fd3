import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { queryRow, queryRows } from '../database/sql';
import type { EventType } from '../ledger/outbox';
import { type EventRecord, eventsTable } from '../ledger/events.table';

const EVENT = eventsTable.selectList;

/** The read side of the outbox (ledger/outbox.ts): GET /v1/events. */
@Injectable()
export class EventsRepository {
  async findForClient(db: EntityManager, clientId: string, id: string): Promise<EventRecord | undefined> {
    return queryRow<EventRecord>(db, `SELECT ${EVENT} FROM events WHERE id = $1 AND client_id = $2`, [id, clientId]);
  }

  /**
   * One page of a client's events, newest first, after the cursor event, of
   * one type or all. Newest is by writing transaction, and only events whose
   * transaction is older than every one still running are shown (xact_id
   * below the snapshot's xmin): an event that commits later always sorts
   * above what a reader has already seen, so a merchant catching up
   * newest-first until an event it knows misses nothing. An event is listed
   * once the writes that started before its own have ended, which is
   * milliseconds unless a long transaction is open on the database.
   */
  async listForClient(
    db: EntityManager,
    clientId: string,
    page: { limit: number; startingAfter?: string; type?: EventType },
  ): Promise<{ events: EventRecord[]; hasMore: boolean }> {
    const rows = await queryRows<EventRecord>(
      db,
      `SELECT ${EVENT} FROM events
        WHERE client_id = $1
          AND xact_id < pg_snapshot_xmin(pg_current_snapshot())
          AND ($2::text IS NULL
               OR (xact_id, id) < (SELECT xact_id, id FROM events WHERE id = $2 AND client_id = $1))
          AND ($3::text IS NULL OR type = $3)
        ORDER BY xact_id DESC, id DESC
        LIMIT $4`,
      [clientId, page.startingAfter ?? null, page.type ?? null, page.limit + 1],
    );
    return { events: rows.slice(0, page.limit), hasMore: rows.length > page.limit };
  }
}
