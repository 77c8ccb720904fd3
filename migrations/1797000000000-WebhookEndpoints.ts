import type { MigrationInterface, QueryRunner } from 'typeorm';
import { ulid } from 'ulid';
import { SecretBox } from '../src/common/secret-box';
import { secretsConfig } from '../src/config/app-config';

/**
 * Webhook endpoints a client manages itself (POST /v1/webhook_endpoints):
 *
 * - several per client, at most 16 live ones: each live endpoint holds one of
 *   the client's 16 slots (webhook_endpoints_slot_key), so two concurrent
 *   creations can never make a seventeenth, whatever the code does;
 * - ids `we_` and a ULID, the API's shape (the existing rows get one, dated
 *   from their creation; their deliveries follow);
 * - enabled_events (the event types it gets, or `*`), status (enabled or
 *   disabled) and a description;
 * - a delete keeps the row (deleted_at), so the deliveries it made keep their
 *   foreign key; it frees the slot and forgets the secrets;
 * - the signing secret sealed with SECRETS_KEY (common/secret-box.ts) in
 *   secret_ciphertext, and during a rotation the previous one and when it
 *   stops signing. The secrets kept in clear until now are sealed here, with
 *   the SECRETS_KEY of the migration's environment: it must be the one the
 *   API and the worker run with.
 * - idempotency_keys may hold the answer of a write that names no operation
 *   row (an endpoint's creation, update or rotation): such a key is written
 *   with its answer, in the transaction of the write, never leased.
 */
export class WebhookEndpoints1797000000000 implements MigrationInterface {
  name = 'WebhookEndpoints1797000000000';

  async up(db: QueryRunner): Promise<void> {
    const box = new SecretBox(secretsConfig());
    await db.query(`ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_endpoint_id_fkey`);
    await db.query(`
      ALTER TABLE webhook_endpoints
        DROP CONSTRAINT webhook_endpoints_client_key,
        ALTER COLUMN id DROP DEFAULT,
        ALTER COLUMN id TYPE text USING id::text,
        ADD COLUMN enabled_events text[] NOT NULL DEFAULT '{*}',
        ADD COLUMN status text NOT NULL DEFAULT 'enabled',
        ADD COLUMN description text,
        ADD COLUMN secret_ciphertext text,
        ADD COLUMN previous_secret_ciphertext text,
        ADD COLUMN previous_secret_expires_at timestamptz,
        ADD COLUMN slot smallint,
        ADD COLUMN deleted_at timestamptz`);
    await db.query(`ALTER TABLE webhook_deliveries ALTER COLUMN endpoint_id TYPE text USING endpoint_id::text`);

    const existing = (await db.query(
      `SELECT id, secret, (extract(epoch FROM created_at) * 1000)::float8 AS created_ms FROM webhook_endpoints`,
    )) as { id: string; secret: string; created_ms: number }[];
    const renamed = existing.map((row) => ({ ...row, newId: `we_${ulid(Math.floor(row.created_ms))}` }));
    await db.query(
      `UPDATE webhook_endpoints w
          SET id = m.new_id, secret_ciphertext = m.sealed, slot = 1
         FROM unnest($1::text[], $2::text[], $3::text[]) AS m(old_id, new_id, sealed)
        WHERE w.id = m.old_id`,
      [renamed.map((row) => row.id), renamed.map((row) => row.newId), renamed.map((row) => box.seal(row.secret))],
    );
    await db.query(
      `UPDATE webhook_deliveries d SET endpoint_id = m.new_id
         FROM unnest($1::text[], $2::text[]) AS m(old_id, new_id)
        WHERE d.endpoint_id = m.old_id`,
      [renamed.map((row) => row.id), renamed.map((row) => row.newId)],
    );

    await db.query(`
      ALTER TABLE webhook_endpoints
        DROP COLUMN secret,
        DROP CONSTRAINT webhook_endpoints_url_check,
        ADD CONSTRAINT webhook_endpoints_url_check CHECK (url ~ '^https?://' AND length(url) <= 2048),
        ADD CONSTRAINT webhook_endpoints_id_check CHECK (id ~ '^we_[0-9A-HJKMNP-TV-Z]{26}$'),
        ADD CONSTRAINT webhook_endpoints_enabled_events_check CHECK (
          cardinality(enabled_events) BETWEEN 1 AND 7
          AND enabled_events <@ ARRAY['*', 'payment.succeeded', 'payment.failed', 'payment.requires_review',
                                      'refund.succeeded', 'refund.failed', 'refund.requires_review']),
        ADD CONSTRAINT webhook_endpoints_status_check CHECK (status IN ('enabled', 'disabled')),
        ADD CONSTRAINT webhook_endpoints_description_check CHECK (length(description) <= 500),
        ADD CONSTRAINT webhook_endpoints_secret_ciphertext_check CHECK ((secret_ciphertext IS NULL) = (deleted_at IS NOT NULL)),
        ADD CONSTRAINT webhook_endpoints_previous_secret_check
          CHECK ((previous_secret_ciphertext IS NULL) = (previous_secret_expires_at IS NULL)
                 AND (previous_secret_ciphertext IS NULL OR secret_ciphertext IS NOT NULL)),
        ADD CONSTRAINT webhook_endpoints_slot_check
          CHECK (slot BETWEEN 1 AND 16 AND (slot IS NULL) = (deleted_at IS NOT NULL)),
        ADD CONSTRAINT webhook_endpoints_slot_key UNIQUE (client_id, slot)`);
    await db.query(`
      ALTER TABLE webhook_deliveries
        ADD CONSTRAINT webhook_deliveries_endpoint_id_fkey FOREIGN KEY (client_id, endpoint_id)
          REFERENCES webhook_endpoints (client_id, id)`);

    await db.query(`
      ALTER TABLE idempotency_keys
        DROP CONSTRAINT idempotency_keys_operation_check,
        ADD CONSTRAINT idempotency_keys_operation_check CHECK (
          num_nonnulls(payment_id, refund_id) = 1
          OR (num_nonnulls(payment_id, refund_id) = 0 AND completed_at IS NOT NULL))`);
  }

  /**
   * Back to one endpoint per client with its secret in clear: each client
   * keeps its oldest live endpoint; the others, the deleted ones and their
   * deliveries go, and so do the keys that answered endpoint writes.
   */
  async down(db: QueryRunner): Promise<void> {
    const box = new SecretBox(secretsConfig());
    await db.query(`DELETE FROM idempotency_keys WHERE payment_id IS NULL AND refund_id IS NULL`);
    await db.query(`
      ALTER TABLE idempotency_keys
        DROP CONSTRAINT idempotency_keys_operation_check,
        ADD CONSTRAINT idempotency_keys_operation_check CHECK (num_nonnulls(payment_id, refund_id) = 1)`);

    await db.query(`
      CREATE TEMPORARY TABLE kept_endpoints ON COMMIT DROP AS
        SELECT DISTINCT ON (client_id) client_id, id, gen_random_uuid() AS new_id
          FROM webhook_endpoints WHERE deleted_at IS NULL ORDER BY client_id, created_at, id`);
    await db.query(`
      DELETE FROM webhook_deliveries d
       WHERE NOT EXISTS (SELECT 1 FROM kept_endpoints k WHERE k.client_id = d.client_id AND k.id = d.endpoint_id)`);
    await db.query(`
      DELETE FROM webhook_endpoints w
       WHERE NOT EXISTS (SELECT 1 FROM kept_endpoints k WHERE k.client_id = w.client_id AND k.id = w.id)`);
    await db.query(`ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_endpoint_id_fkey`);
    await db.query(`ALTER TABLE webhook_endpoints DROP CONSTRAINT webhook_endpoints_id_check, ADD COLUMN secret text`);
    const kept = (await db.query(`SELECT id, secret_ciphertext FROM webhook_endpoints`)) as { id: string; secret_ciphertext: string }[];
    await db.query(
      `UPDATE webhook_endpoints w SET secret = m.secret FROM unnest($1::text[], $2::text[]) AS m(id, secret) WHERE w.id = m.id`,
      [kept.map((row) => row.id), kept.map((row) => box.open(row.secret_ciphertext))],
    );
    await db.query(`UPDATE webhook_deliveries d SET endpoint_id = k.new_id FROM kept_endpoints k WHERE d.endpoint_id = k.id`);
    await db.query(`UPDATE webhook_endpoints w SET id = k.new_id FROM kept_endpoints k WHERE w.id = k.id`);
    await db.query(`
      ALTER TABLE webhook_endpoints
        DROP CONSTRAINT webhook_endpoints_slot_key,
        DROP CONSTRAINT webhook_endpoints_url_check,
        DROP COLUMN enabled_events,
        DROP COLUMN status,
        DROP COLUMN description,
        DROP COLUMN secret_ciphertext,
        DROP COLUMN previous_secret_ciphertext,
        DROP COLUMN previous_secret_expires_at,
        DROP COLUMN slot,
        DROP COLUMN deleted_at,
        ALTER COLUMN id TYPE uuid USING id::uuid,
        ALTER COLUMN id SET DEFAULT gen_random_uuid(),
        ALTER COLUMN secret SET NOT NULL,
        ADD CONSTRAINT webhook_endpoints_url_check CHECK (url ~ '^https?://'),
        ADD CONSTRAINT webhook_endpoints_secret_check CHECK (secret ~ '^whsec_'),
        ADD CONSTRAINT webhook_endpoints_client_key UNIQUE (client_id)`);
    await db.query(`ALTER TABLE webhook_deliveries ALTER COLUMN endpoint_id TYPE uuid USING endpoint_id::uuid`);
    await db.query(`
      ALTER TABLE webhook_deliveries
        ADD CONSTRAINT webhook_deliveries_endpoint_id_fkey FOREIGN KEY (client_id, endpoint_id)
          REFERENCES webhook_endpoints (client_id, id)`);
  }
}
