import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { queryRow, queryRows } from '../database/sql';
import { type EventRecord, eventsTable } from '../ledger/events.table';
import { type DeliveryStatus, type WebhookDelivery, webhookDeliveriesTable } from './webhook-deliveries.table';

const DELIVERY = webhookDeliveriesTable.selectList;
const EVENT = eventsTable.selectList;

/** A delivery held by one worker: only the holder of the token records what its send gave. */
export interface DeliveryClaim {
  /** The event's client: every statement on the claim names it, so it runs on that client's shard. */
  clientId: string;
  eventId: string;
  endpointId: string;
  claimToken: string;
}

/**
 * What a send needs: the event, where to send it, the sealed secrets to sign
 * it with (the current one, then a rotated one until it expires), and
 * whether the endpoint still takes deliveries (enabled, not deleted).
 */
export interface ClaimedDelivery {
  event: EventRecord;
  url: string;
  sealedSecrets: string[];
  live: boolean;
  attempts: number;
}

/**
 * The webhook_deliveries table: Postgres' record of what is still to deliver.
 * Redis only carries the sends of the moment, so a delivery whose job was lost
 * (a flush, a killed worker) is claimed again once its claim expires.
 */
@Injectable()
export class WebhookDeliveriesRepository {
  /**
   * Claims due deliveries for `claimMs`, at most `limit`, and no more per
   * endpoint than leaves it `maxInFlightPerEndpoint` claims at once: an
   * endpoint that never answers holds that many sends and no more. The first
   * due delivery of every endpoint comes before the second of any, so one
   * endpoint's backlog does not starve the others. A delivery claimed by a
   * concurrent dispatch is skipped: the conditional update re-reads the claim
   * after waiting for the other's lock. Across clients, so on a sharded
   * schema across shards; every statement on a claim then names its client.
   */
  async claimDue(
    db: EntityManager,
    { limit, maxInFlightPerEndpoint, claimMs }: { limit: number; maxInFlightPerEndpoint: number; claimMs: number },
  ): Promise<DeliveryClaim[]> {
    return queryRows<DeliveryClaim>(
      db,
      `WITH in_flight AS (
         SELECT endpoint_id, count(*) AS held FROM webhook_deliveries
          WHERE status = 'pending' AND claimed_until > now()
          GROUP BY endpoint_id
       ), due AS (
         SELECT client_id, event_id, endpoint_id,
                row_number() OVER (PARTITION BY endpoint_id ORDER BY next_attempt_at, event_id) AS place
           FROM webhook_deliveries
          WHERE status = 'pending' AND next_attempt_at <= now()
            AND (claimed_until IS NULL OR claimed_until <= now())
       ), chosen AS (
         SELECT due.client_id, due.event_id, due.endpoint_id
           FROM due LEFT JOIN in_flight USING (endpoint_id)
          WHERE due.place <= $1 - COALESCE(in_flight.held, 0)
          ORDER BY due.place, due.event_id
          LIMIT $2
       )
       UPDATE webhook_deliveries d
          SET claim_token = gen_random_uuid(), claimed_until = now() + $3 * interval '1 millisecond'
         FROM chosen
        WHERE d.client_id = chosen.client_id AND d.event_id = chosen.event_id AND d.endpoint_id = chosen.endpoint_id
          AND d.status = 'pending' AND (d.claimed_until IS NULL OR d.claimed_until <= now())
        RETURNING d.client_id AS "clientId", d.event_id AS "eventId", d.endpoint_id AS "endpointId", d.claim_token AS "claimToken"`,
      [maxInFlightPerEndpoint, limit, claimMs],
    );
  }

  /** The claimed delivery with its event and endpoint; undefined when the claim was lost or the delivery settled. */
  async findClaimed(db: EntityManager, claim: DeliveryClaim): Promise<ClaimedDelivery | undefined> {
    const row = await queryRow<EventRecord & { url: string; sealedSecrets: string[]; live: boolean; attempts: number }>(
      db,
      `SELECT event.*, w.url, d.attempts,
              w.status = 'enabled' AND w.deleted_at IS NULL AS live,
              array_remove(ARRAY[w.secret_ciphertext,
                                 CASE WHEN w.previous_secret_expires_at > now() THEN w.previous_secret_ciphertext END],
                           NULL) AS "sealedSecrets"
         FROM webhook_deliveries d
         JOIN webhook_endpoints w ON w.client_id = $1 AND w.id = d.endpoint_id
         CROSS JOIN LATERAL (SELECT ${EVENT} FROM events WHERE events.client_id = $1 AND events.id = d.event_id) event
        WHERE d.client_id = $1 AND d.event_id = $2 AND d.endpoint_id = $3 AND d.claim_token = $4 AND d.status = 'pending'`,
      [claim.clientId, claim.eventId, claim.endpointId, claim.claimToken],
    );
    if (!row) return undefined;
    const { url, sealedSecrets, live, attempts, ...event } = row;
    return { event, url, sealedSecrets, live, attempts };
  }

  /**
   * A 2xx is a fact whoever holds the claim: the delivery is delivered, and a
   * later claim's send (a duplicate with the same webhook-id) records nothing.
   * Returns the delivery's commit time, or undefined when it was settled already.
   */
  async recordDelivered(db: EntityManager, claim: DeliveryClaim): Promise<Date | undefined> {
    const row = await queryRow<{ createdAt: Date }>(
      db,
      `UPDATE webhook_deliveries
          SET status = 'delivered', attempts = attempts + 1, delivered_at = now(), last_error = NULL,
              claim_token = NULL, claimed_until = NULL
        WHERE client_id = $1 AND event_id = $2 AND endpoint_id = $3 AND status = 'pending'
        RETURNING created_at AS "createdAt"`,
      [claim.clientId, claim.eventId, claim.endpointId],
    );
    return row?.createdAt;
  }

  /**
   * A send that got no 2xx, recorded by the claim's holder only: the next
   * attempt in `retryInMs`, or failed once that would fall past the horizon
   * counted from the event's commit. Undefined when the claim was lost.
   */
  async recordFailure(
    db: EntityManager,
    claim: DeliveryClaim,
    failure: { error: string; retryInMs: number; horizonHours: number },
  ): Promise<Extract<DeliveryStatus, 'pending' | 'failed'> | undefined> {
    const row = await queryRow<{ status: 'pending' | 'failed' }>(
      db,
      `UPDATE webhook_deliveries
          SET attempts = attempts + 1, last_error = $5, claim_token = NULL, claimed_until = NULL,
              next_attempt_at = now() + $6 * interval '1 millisecond',
              status = CASE WHEN now() + $6 * interval '1 millisecond' > created_at + $7 * interval '1 hour'
                            THEN 'failed' ELSE 'pending' END
        WHERE client_id = $1 AND event_id = $2 AND endpoint_id = $3 AND claim_token = $4 AND status = 'pending'
        RETURNING status`,
      [claim.clientId, claim.eventId, claim.endpointId, claim.claimToken, failure.error, failure.retryInMs, failure.horizonHours],
    );
    return row?.status;
  }

  /**
   * Stops an endpoint's pending deliveries (of one event, or all): failed,
   * with `reason` as their last error, their claims dropped so that a send in
   * flight records nothing. Deliveries to other endpoints are untouched.
   */
  async stopPending(db: EntityManager, of: { clientId: string; endpointId: string; eventId?: string }, reason: string): Promise<number> {
    const rows = await queryRows(
      db,
      `UPDATE webhook_deliveries
          SET status = 'failed', last_error = $3, claim_token = NULL, claimed_until = NULL
        WHERE client_id = $1 AND endpoint_id = $2 AND status = 'pending' AND ($4::text IS NULL OR event_id = $4)
        RETURNING 1`,
      [of.clientId, of.endpointId, reason, of.eventId ?? null],
    );
    return rows.length;
  }

  /**
   * Sends an event again (webhook:redeliver): its deliveries to live
   * endpoints (or to one of them) become pending and due now, whatever they
   * were, with their retry horizon counted from now. A delivery in flight
   * keeps its claim. Returns each delivery taken and the status it had.
   */
  async redeliver(
    db: EntityManager,
    of: { clientId: string; eventId: string; endpointId?: string },
  ): Promise<{ endpointId: string; previousStatus: DeliveryStatus }[]> {
    return queryRows(
      db,
      `WITH chosen AS (
         SELECT d.endpoint_id, d.status
           FROM webhook_deliveries d
           JOIN webhook_endpoints w ON w.client_id = d.client_id AND w.id = d.endpoint_id
          WHERE d.client_id = $1 AND d.event_id = $2 AND ($3::text IS NULL OR d.endpoint_id = $3)
            AND w.status = 'enabled' AND w.deleted_at IS NULL
            FOR UPDATE OF d
       )
       UPDATE webhook_deliveries d
          SET status = 'pending', next_attempt_at = now(), created_at = now(), delivered_at = NULL
         FROM chosen
        WHERE d.client_id = $1 AND d.event_id = $2 AND d.endpoint_id = chosen.endpoint_id
        RETURNING d.endpoint_id AS "endpointId", chosen.status AS "previousStatus"`,
      [of.clientId, of.eventId, of.endpointId ?? null],
    );
  }

  /** For the operator: deliveries, newest first, by client, event or status. */
  async list(
    db: EntityManager,
    filter: { clientId?: string; eventId?: string; status?: DeliveryStatus; limit: number },
  ): Promise<WebhookDelivery[]> {
    return queryRows<WebhookDelivery>(
      db,
      `SELECT ${DELIVERY} FROM webhook_deliveries
        WHERE ($1::uuid IS NULL OR client_id = $1)
          AND ($2::text IS NULL OR event_id = $2)
          AND ($3::text IS NULL OR status = $3)
        ORDER BY created_at DESC, event_id DESC
        LIMIT $4`,
      [filter.clientId ?? null, filter.eventId ?? null, filter.status ?? null, filter.limit],
    );
  }
}
