import { firstUlidAt, newUlid, ulidTime } from '../common/ulid';
import type { Params } from '../database/sql';
import { type JsonAroundUpdatedAt, aroundUpdatedAt } from './around-updated-at';
import type { AnnouncedStatus, Operation, OperationName, OperationRow } from './operation';

/**
 * The outbox: every status a payment or a refund takes after pending is
 * announced by an event written in the statement that changes the status
 * (announcedCtes), with one delivery per webhook endpoint of its client that
 * asks for it.
 * What reads the events and pushes them is merchant-events/.
 */

export const EVENT_TYPES = [
  'payment.succeeded',
  'payment.failed',
  'payment.requires_review',
  'refund.succeeded',
  'refund.failed',
  'refund.requires_review',
] as const;
export type EventType = `${OperationName}.${AnnouncedStatus}` & (typeof EVENT_TYPES)[number];

/** `evt_` and a ULID: what newEventId makes, and all an event id can be. */
export const EVENT_ID_PATTERN = /^evt_[0-9A-HJKMNP-TV-Z]{26}$/;

export function newEventId(): string {
  return `evt_${newUlid()}`;
}

/** The smallest event id made at `ms`: every event id below it was made earlier. */
export function firstEventIdAt(ms: number): string {
  return `evt_${firstUlidAt(ms)}`;
}

/**
 * The instant before which an event was made longer than `days` ago, by the
 * clock of whoever asks, as event ids carry the clock of whoever made them.
 */
export function retentionCutoff(days: number): number {
  return Date.now() - days * 86_400_000;
}

/** When an event (of EVENT_ID_PATTERN) was made, by its id: its created_at, to the milliseconds of its write. */
export function eventIdTime(id: string): number {
  return ulidTime(id.slice('evt_'.length));
}

/** The event that announces the status a row takes: its data is the row as it now is, updated_at left to the statement. */
export interface Change {
  id: string;
  type: EventType;
  data: JsonAroundUpdatedAt;
}

/** The event for a row as a decision leaves it (see decidedAs). */
export function changeOf<R extends OperationRow>(operation: Operation<R>, row: R): Change {
  if (row.status === 'pending') throw new Error(`${operation.name} ${row.id} is pending: no event announces that`);
  return {
    id: newEventId(),
    type: `${operation.name}.${row.status}`,
    data: aroundUpdatedAt((updatedAt) => JSON.stringify({ object: operation.resource(row, updatedAt) })),
  };
}

/**
 * The outbox rows of a status change, as CTEs of the statement that makes it
 * (OperationsRepository.recordOutcomeUnderLease), so they commit with it or
 * not at all: the event, for the row the CTE `moved` returns (none: no
 * event), and one delivery per enabled webhook endpoint of its client whose
 * enabled_events name the event's type (or `*`): the endpoints as they are
 * when the event is written. A second event
 * for the same status of the same row violates events_payment_type_key (or
 * events_refund_type_key) and fails the whole statement: the change is
 * announced once. `client` is the statement's parameter for the client,
 * found as a value and not through the event's row, so on a sharded schema
 * the statement stays on one shard. `updatedAtJson` is the SQL of the row's
 * new updated_at as a JSON string.
 */
export function announcedCtes<R extends OperationRow>(
  params: Params,
  operation: Operation<R>,
  client: string,
  change: Change,
  updatedAtJson: string,
): string {
  const id = params.add(change.id);
  const type = params.add(change.type);
  const before = params.add(change.data.before);
  const after = params.add(change.data.after);
  return `event AS (
       INSERT INTO events (id, client_id, type, ${operation.keyColumn}, data)
       SELECT ${id}, ${client}, ${type}, moved.id, (${before} || ${updatedAtJson} || ${after})::json FROM moved
       RETURNING id, client_id
     ),
     delivery AS (
       INSERT INTO webhook_deliveries (event_id, endpoint_id, client_id)
       SELECT event.id, endpoint.id, event.client_id
         FROM event JOIN webhook_endpoints endpoint ON endpoint.client_id = ${client}
        WHERE endpoint.status = 'enabled' AND endpoint.deleted_at IS NULL
          AND endpoint.enabled_events && ARRAY['*', ${type}::text]
     )`;
}
