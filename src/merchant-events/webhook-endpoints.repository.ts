import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { queryRow, queryRows } from '../database/sql';
import { MAX_ENDPOINTS_PER_CLIENT } from './webhook-endpoint';
import { type EnabledEvent, type EndpointStatus, type WebhookEndpointRecord, webhookEndpointsTable } from './webhook-endpoints.table';

const ENDPOINT = webhookEndpointsTable.selectList;

/** A new endpoint's row, its secret sealed already. */
export interface NewEndpoint {
  id: string;
  clientId: string;
  url: string;
  enabledEvents: EnabledEvent[];
  description: string | null;
  secretCiphertext: string;
}

export interface EndpointChanges {
  url?: string;
  enabledEvents?: EnabledEvent[];
  status?: EndpointStatus;
  description?: string;
}

/**
 * The webhook_endpoints table. Every statement names the client: another
 * client's endpoint is never found, so it is a 404 on every route. A deleted
 * endpoint keeps its row (its deliveries refer to it) and is found by none.
 */
@Injectable()
export class WebhookEndpointsRepository {
  /**
   * Inserts the endpoint into the client's lowest free slot. Undefined when
   * no slot is free, or when a concurrent creation took the one this statement
   * chose (webhook_endpoints_slot_key): the caller tells the two apart with
   * countLive, and tries again on the second.
   */
  async insertInFreeSlot(db: EntityManager, endpoint: NewEndpoint): Promise<WebhookEndpointRecord | undefined> {
    return queryRow<WebhookEndpointRecord>(
      db,
      `INSERT INTO webhook_endpoints (id, client_id, url, enabled_events, description, secret_ciphertext, slot)
       SELECT $1, $2, $3, $4, $5, $6, free.slot
         FROM generate_series(1, $7::int) AS free(slot)
        WHERE NOT EXISTS (SELECT 1 FROM webhook_endpoints WHERE client_id = $2 AND slot = free.slot)
        ORDER BY free.slot
        LIMIT 1
       ON CONFLICT ON CONSTRAINT webhook_endpoints_slot_key DO NOTHING
       RETURNING ${ENDPOINT}`,
      [
        endpoint.id,
        endpoint.clientId,
        endpoint.url,
        endpoint.enabledEvents,
        endpoint.description,
        endpoint.secretCiphertext,
        MAX_ENDPOINTS_PER_CLIENT,
      ],
    );
  }

  async countLive(db: EntityManager, clientId: string): Promise<number> {
    const row = await queryRow<{ count: number }>(
      db,
      `SELECT count(*)::int AS count FROM webhook_endpoints WHERE client_id = $1 AND deleted_at IS NULL`,
      [clientId],
    );
    return row?.count ?? 0;
  }

  async findLive(db: EntityManager, clientId: string, id: string): Promise<WebhookEndpointRecord | undefined> {
    return queryRow<WebhookEndpointRecord>(
      db,
      `SELECT ${ENDPOINT} FROM webhook_endpoints WHERE client_id = $1 AND id = $2 AND deleted_at IS NULL`,
      [clientId, id],
    );
  }

  /** A page of the client's live endpoints, newest first (ids are ULIDs), after the cursor's id. */
  async listLive(
    db: EntityManager,
    clientId: string,
    page: { limit: number; startingAfter?: string },
  ): Promise<{ endpoints: WebhookEndpointRecord[]; hasMore: boolean }> {
    const rows = await queryRows<WebhookEndpointRecord>(
      db,
      `SELECT ${ENDPOINT} FROM webhook_endpoints
        WHERE client_id = $1 AND deleted_at IS NULL AND ($2::text IS NULL OR id < $2)
        ORDER BY id DESC
        LIMIT $3`,
      [clientId, page.startingAfter ?? null, page.limit + 1],
    );
    return { endpoints: rows.slice(0, page.limit), hasMore: rows.length > page.limit };
  }

  /** Changes the fields given, leaves the others; undefined when the client has no such live endpoint. */
  async update(db: EntityManager, clientId: string, id: string, changes: EndpointChanges): Promise<WebhookEndpointRecord | undefined> {
    return queryRow<WebhookEndpointRecord>(
      db,
      `UPDATE webhook_endpoints
          SET url = COALESCE($3, url), enabled_events = COALESCE($4, enabled_events),
              status = COALESCE($5, status), description = COALESCE($6, description)
        WHERE client_id = $1 AND id = $2 AND deleted_at IS NULL
        RETURNING ${ENDPOINT}`,
      [clientId, id, changes.url ?? null, changes.enabledEvents ?? null, changes.status ?? null, changes.description ?? null],
    );
  }

  /**
   * Replaces the secret. With `previousForHours` above 0, the replaced one
   * keeps signing beside it until then (a rotation during another's window
   * drops the oldest: two secrets sign at most); with 0 it stops at once.
   */
  async rotateSecret(
    db: EntityManager,
    clientId: string,
    id: string,
    secretCiphertext: string,
    previousForHours: number,
  ): Promise<WebhookEndpointRecord | undefined> {
    return queryRow<WebhookEndpointRecord>(
      db,
      `UPDATE webhook_endpoints
          SET previous_secret_ciphertext = CASE WHEN $4 > 0 THEN secret_ciphertext END,
              previous_secret_expires_at = CASE WHEN $4 > 0 THEN now() + $4 * interval '1 hour' END,
              secret_ciphertext = $3
        WHERE client_id = $1 AND id = $2 AND deleted_at IS NULL
        RETURNING ${ENDPOINT}`,
      [clientId, id, secretCiphertext, previousForHours],
    );
  }

  /** Deletes the endpoint for the API: its slot is freed and its secrets forgotten; the row stays for its deliveries. */
  async markDeleted(db: EntityManager, clientId: string, id: string): Promise<boolean> {
    const rows = await queryRows(
      db,
      `UPDATE webhook_endpoints
          SET deleted_at = now(), slot = NULL, secret_ciphertext = NULL,
              previous_secret_ciphertext = NULL, previous_secret_expires_at = NULL
        WHERE client_id = $1 AND id = $2 AND deleted_at IS NULL
        RETURNING 1`,
      [clientId, id],
    );
    return rows.length === 1;
  }

  /** Every sealed secret, live and previous, for secrets:reencrypt; `afterId` pages through them. */
  async sealedSecrets(
    db: EntityManager,
    page: { afterClientId?: string; afterId?: string; limit: number },
  ): Promise<Pick<WebhookEndpointRecord, 'clientId' | 'id' | 'secretCiphertext' | 'previousSecretCiphertext'>[]> {
    return queryRows(
      db,
      `SELECT client_id AS "clientId", id, secret_ciphertext AS "secretCiphertext",
              previous_secret_ciphertext AS "previousSecretCiphertext"
         FROM webhook_endpoints
        WHERE deleted_at IS NULL AND ($1::uuid IS NULL OR (client_id, id) > ($1::uuid, $2::text))
        ORDER BY client_id, id
        LIMIT $3`,
      [page.afterClientId ?? null, page.afterId ?? null, page.limit],
    );
  }

  /** Writes re-sealed secrets, only where the row still holds what was read: a concurrent rotation wins. */
  async replaceSealed(
    db: EntityManager,
    row: { clientId: string; id: string },
    column: 'secret_ciphertext' | 'previous_secret_ciphertext',
    from: string,
    to: string,
  ): Promise<boolean> {
    const rows = await queryRows(
      db,
      `UPDATE webhook_endpoints SET ${column} = $4 WHERE client_id = $1 AND id = $2 AND ${column} = $3 RETURNING 1`,
      [row.clientId, row.id, from, to],
    );
    return rows.length === 1;
  }
}
