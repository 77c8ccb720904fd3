import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { queryRow, queryRows } from '../database/sql';
import { toResource } from '../payments/payment';
import { type JsonAroundUpdatedAt, aroundUpdatedAt } from '../payments/payment-outcome';
import type { Payment } from '../payments/payments.table';
import { type EventType, eventTypeFor, newEventId } from './event';
import { type EventRecord, eventsTable } from './events.table';

const EVENT = eventsTable.selectList;

/** The event that announces the status a payment takes: its data is the payment as it now is, updated_at left to the statement. */
export interface PaymentChange {
  id: string;
  type: EventType;
  data: JsonAroundUpdatedAt;
}

/** The event for a payment as a decision leaves it (see decidedAs). */
export function paymentChangeOf(payment: Payment): PaymentChange {
  if (payment.status === 'pending') throw new Error(`payment ${payment.id} is pending: no event announces that`);
  return {
    id: newEventId(),
    type: eventTypeFor(payment.status),
    data: aroundUpdatedAt((updatedAt) => JSON.stringify({ object: toResource(payment, updatedAt) })),
  };
}

/**
 * The outbox rows of a status change, as CTEs of the statement that makes it
 * (PaymentsRepository.recordOutcomeUnderLease), so they commit with it or not
 * at all: the event, for the payment row the CTE `moved` returns (none: no
 * event), and one delivery per webhook endpoint of its client. A second event
 * for the same status of the same payment violates events_payment_type_key
 * and fails the whole statement: the change is announced once. `$1` is the
 * client, found as a value and not through the event's row, so on a sharded
 * schema the statement stays on one shard; the event's own values are
 * `$first` onwards, in the order of paymentChangeParams. `updatedAtJson` is
 * the SQL of the payment's new updated_at as a JSON string.
 */
export function announcedCtes(first: number, updatedAtJson: string): string {
  const [id, type, before, after] = [0, 1, 2, 3].map((i) => `$${first + i}`);
  return `event AS (
       INSERT INTO events (id, client_id, type, payment_id, data)
       SELECT ${id}, $1, ${type}, moved.id, (${before} || ${updatedAtJson} || ${after})::json FROM moved
       RETURNING id, client_id
     ),
     delivery AS (
       INSERT INTO webhook_deliveries (event_id, endpoint_id, client_id)
       SELECT event.id, endpoint.id, event.client_id
         FROM event JOIN webhook_endpoints endpoint ON endpoint.client_id = $1
     )`;
}

export function paymentChangeParams(change: PaymentChange): unknown[] {
  return [change.id, change.type, change.data.before, change.data.after];
}

/** The events table: the outbox every status change writes to, and the read side of GET /v1/events. */
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
