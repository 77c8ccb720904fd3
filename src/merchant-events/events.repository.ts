import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { limitLiteral, queryRow, queryRows } from '../database/sql';
import { type EventType, firstEventIdAt } from '../ledger/outbox';
import { type EventRecord, eventsTable } from '../ledger/events.table';

const EVENT = eventsTable.selectList;

/**
 * An event whose delivery to some endpoint is still pending: kept, whatever
 * its age, so that a retry never finds its event gone. `e` is the event.
 */
const STILL_DELIVERING = `EXISTS (SELECT 1 FROM webhook_deliveries d
                                 WHERE d.client_id = e.client_id AND d.event_id = e.id AND d.status = 'pending')`;

/** The read side of the outbox (ledger/outbox.ts): GET /v1/events, and the prune of old events. */
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
   * milliseconds unless a long transaction is open anywhere on the Postgres
   * server (transaction ids, and so the snapshot's xmin, are the server's).
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

  /**
   * Deletes up to `limit` of a client's events made before `madeBefore` (ms),
   * oldest first, each with its deliveries, all settled: an event with a
   * delivery still pending is passed over. An event's age is read from its id,
   * a ULID of the time it was made (the event's created_at, to the
   * milliseconds of its write), so the primary key (client_id, id) is the
   * index of the events by age and the prune costs the writes no index of its
   * own. One statement: the events are locked (SKIP LOCKED, so concurrent
   * prunes take different ones; nothing else ever locks an old event), then
   * their deliveries and they are deleted. Should a delivery of one of them
   * turn pending meanwhile (an operator's redelivery), it is not deleted, and
   * its event's foreign key fails the whole statement: nothing is pruned, and
   * the next run passes over that event. The batch size is in the text
   * (limitLiteral), so a generic plan joins the batch back by primary key.
   */
  async pruneMadeBefore(
    db: EntityManager,
    clientId: string,
    madeBefore: number,
    limit: number,
  ): Promise<{ events: number; deliveries: number }> {
    const [row] = await queryRows<{ events: number; deliveries: number }>(
      db,
      `WITH batch AS MATERIALIZED (
         SELECT e.id FROM events e
          WHERE e.client_id = $1 AND e.id < $2 AND NOT ${STILL_DELIVERING}
          ORDER BY e.id
          LIMIT ${limitLiteral(limit)}
            FOR UPDATE SKIP LOCKED
       ), deliveries AS (
         DELETE FROM webhook_deliveries d USING batch
          WHERE d.client_id = $1 AND d.event_id = batch.id AND d.status <> 'pending'
          RETURNING 1
       ), events AS (
         DELETE FROM events e USING batch
          WHERE e.client_id = $1 AND e.id = batch.id
          RETURNING 1
       )
       SELECT (SELECT count(*)::int FROM events) AS events, (SELECT count(*)::int FROM deliveries) AS deliveries`,
      [clientId, firstEventIdAt(madeBefore)],
    );
    return row;
  }

  /** How many of a client's events pruneMadeBefore would delete, counted up to `cap` so that a huge backlog costs no more. */
  async countMadeBefore(db: EntityManager, clientId: string, madeBefore: number, cap: number): Promise<number> {
    const row = await queryRow<{ count: number }>(
      db,
      `SELECT count(*)::int AS count
         FROM (SELECT 1 FROM events e WHERE e.client_id = $1 AND e.id < $2 AND NOT ${STILL_DELIVERING} LIMIT $3) old`,
      [clientId, firstEventIdAt(madeBefore), cap],
    );
    return row?.count ?? 0;
  }
}
