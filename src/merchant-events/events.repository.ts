import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { queryRow, queryRows } from '../database/sql';
import { toResource } from '../payments/payment';
import type { Payment } from '../payments/payments.table';
import { type EventType, eventTypeFor, newEventId } from './event';
import { type EventRecord, eventsTable } from './events.table';

const EVENT = eventsTable.selectList;

/** The events table: the outbox every status change writes to, and the read side of GET /v1/events. */
@Injectable()
export class EventsRepository {
  /**
   * Records the status a payment just took, in the caller's transaction (the
   * one that changed it), and queues one delivery per webhook endpoint of its
   * client, in one statement. The event carries the payment as the caller's
   * transition returned it. A second event for the same status of the same
   * payment violates events_payment_type_key: the change is announced once.
   * The endpoints are found by the client as a value ($2), not through the
   * event's row, so on a sharded schema the statement stays on one shard.
   */
  async recordPaymentChange(db: EntityManager, payment: Payment): Promise<void> {
    if (payment.status === 'pending') throw new Error(`payment ${payment.id} is pending: no event announces that`);
    await db.query(
      `WITH event AS (
         INSERT INTO events (id, client_id, type, payment_id, data) VALUES ($1, $2, $3, $4, $5)
         RETURNING id, client_id
       )
       INSERT INTO webhook_deliveries (event_id, endpoint_id, client_id)
       SELECT event.id, endpoint.id, event.client_id
         FROM event JOIN webhook_endpoints endpoint ON endpoint.client_id = $2`,
      [newEventId(), payment.clientId, eventTypeFor(payment.status), payment.id, JSON.stringify({ object: toResource(payment) })],
    );
  }

  async findForClient(db: EntityManager, clientId: string, id: string): Promise<EventRecord | undefined> {
    return queryRow<EventRecord>(db, `SELECT ${EVENT} FROM events WHERE id = $1 AND client_id = $2`, [id, clientId]);
  }

  /** One page of a client's events, newest first, after the cursor event, of one type or all. */
  async listForClient(
    db: EntityManager,
    clientId: string,
    page: { limit: number; startingAfter?: string; type?: EventType },
  ): Promise<{ events: EventRecord[]; hasMore: boolean }> {
    // As for payments, the cursor's created_at is compared in SQL, at Postgres' microseconds.
    const rows = await queryRows<EventRecord>(
      db,
      `SELECT ${EVENT} FROM events
        WHERE client_id = $1
          AND ($2::text IS NULL
               OR (created_at, id) < (SELECT created_at, id FROM events WHERE id = $2 AND client_id = $1))
          AND ($3::text IS NULL OR type = $3)
        ORDER BY created_at DESC, id DESC
        LIMIT $4`,
      [clientId, page.startingAfter ?? null, page.type ?? null, page.limit + 1],
    );
    return { events: rows.slice(0, page.limit), hasMore: rows.length > page.limit };
  }
}
