import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A schema that shards by client. Every table a payment writes to carries
 * client_id, and every primary, unique and foreign key includes it, so a
 * distributed Postgres that routes rows by a distribution column (Citus on
 * client_id, with payments, keys, events and deliveries co-located) can
 * enforce each key on one shard and run each payment's transactions there.
 * api_clients is the directory of clients, read by API key before any client
 * is known: it stays whole (a Citus reference table, copied to every node).
 *
 * Existing rows already agree: a payment's key, events and deliveries were
 * all written with the payment's client. The composite foreign keys check
 * that as they are added; a row that disagreed would fail the migration,
 * which runs in one transaction, and leave the schema as it was.
 *
 * Two key orders are deliberate. Both columns of a composite key are matched
 * by equality wherever the client is named, so either order serves those
 * statements; payments keeps id and provider_key first because two lookups
 * cannot know the client: an operator's payment:resolve (by payment id) and a
 * provider event (by provider key). Those two reach every shard: see
 * docs/scaling.md, "Sharding by client".
 *
 * processed_messages gains the client of the payment a message applied to.
 * Its rows from before cannot be given one (a provider event id names no
 * payment), and need not be kept: every message they record either moved its
 * payment's provider_version to at least its own version, which refuses it
 * again as stale, or named no payment, which changes nothing again.
 */
export class ShardByClient1796400000000 implements MigrationInterface {
  name = 'ShardByClient1796400000000';

  async up(db: QueryRunner): Promise<void> {
    // The foreign keys that rest on the keys about to be replaced go first.
    await db.query(`ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_payment_id_fkey`);
    await db.query(`ALTER TABLE events DROP CONSTRAINT events_payment_id_fkey`);
    await db.query(`
      ALTER TABLE webhook_deliveries
        DROP CONSTRAINT webhook_deliveries_event_id_fkey,
        DROP CONSTRAINT webhook_deliveries_endpoint_id_fkey`);

    await db.query(`
      ALTER TABLE payments
        DROP CONSTRAINT payments_pkey,
        ADD CONSTRAINT payments_pkey PRIMARY KEY (id, client_id),
        DROP CONSTRAINT payments_provider_key_key,
        ADD CONSTRAINT payments_provider_key_key UNIQUE (provider_key, client_id)`);
    await db.query(`
      ALTER TABLE idempotency_keys
        DROP CONSTRAINT idempotency_keys_payment_id_key,
        ADD CONSTRAINT idempotency_keys_payment_id_key UNIQUE (client_id, payment_id),
        ADD CONSTRAINT idempotency_keys_payment_id_fkey FOREIGN KEY (client_id, payment_id)
          REFERENCES payments (client_id, id) DEFERRABLE INITIALLY DEFERRED`);
    // Pruning runs client by client.
    await db.query(`DROP INDEX idempotency_keys_expires_at_idx`);
    await db.query(`
      CREATE INDEX idempotency_keys_expires_at_idx ON idempotency_keys (client_id, expires_at)
        WHERE expires_at IS NOT NULL`);

    await db.query(`
      ALTER TABLE events
        DROP CONSTRAINT events_pkey,
        ADD CONSTRAINT events_pkey PRIMARY KEY (client_id, id),
        DROP CONSTRAINT events_payment_type_key,
        ADD CONSTRAINT events_payment_type_key UNIQUE (client_id, payment_id, type),
        ADD CONSTRAINT events_payment_id_fkey FOREIGN KEY (client_id, payment_id) REFERENCES payments (client_id, id)`);
    await db.query(paymentStatusHasEvent('client_id = NEW.client_id AND payment_id = NEW.id'));

    await db.query(`
      ALTER TABLE webhook_endpoints
        DROP CONSTRAINT webhook_endpoints_pkey,
        ADD CONSTRAINT webhook_endpoints_pkey PRIMARY KEY (client_id, id)`);
    await db.query(`
      ALTER TABLE webhook_deliveries
        DROP CONSTRAINT webhook_deliveries_pkey,
        ADD CONSTRAINT webhook_deliveries_pkey PRIMARY KEY (client_id, event_id, endpoint_id),
        ADD CONSTRAINT webhook_deliveries_event_id_fkey FOREIGN KEY (client_id, event_id) REFERENCES events (client_id, id),
        ADD CONSTRAINT webhook_deliveries_endpoint_id_fkey FOREIGN KEY (client_id, endpoint_id)
          REFERENCES webhook_endpoints (client_id, id)`);

    await db.query(`DELETE FROM processed_messages`);
    await db.query(`
      ALTER TABLE processed_messages
        ADD COLUMN client_id uuid NOT NULL REFERENCES api_clients (id),
        DROP CONSTRAINT processed_messages_pkey,
        ADD CONSTRAINT processed_messages_pkey PRIMARY KEY (client_id, consumer, message_id)`);
  }

  async down(db: QueryRunner): Promise<void> {
    // One row per message, whichever client it was recorded under (message ids are the provider's, unique).
    await db.query(`
      DELETE FROM processed_messages m USING processed_messages other
       WHERE other.consumer = m.consumer AND other.message_id = m.message_id AND other.client_id < m.client_id`);
    await db.query(`
      ALTER TABLE processed_messages
        DROP CONSTRAINT processed_messages_pkey,
        DROP COLUMN client_id,
        ADD CONSTRAINT processed_messages_pkey PRIMARY KEY (consumer, message_id)`);

    await db.query(`
      ALTER TABLE webhook_deliveries
        DROP CONSTRAINT webhook_deliveries_event_id_fkey,
        DROP CONSTRAINT webhook_deliveries_endpoint_id_fkey,
        DROP CONSTRAINT webhook_deliveries_pkey,
        ADD CONSTRAINT webhook_deliveries_pkey PRIMARY KEY (event_id, endpoint_id)`);
    await db.query(`
      ALTER TABLE webhook_endpoints
        DROP CONSTRAINT webhook_endpoints_pkey,
        ADD CONSTRAINT webhook_endpoints_pkey PRIMARY KEY (id)`);

    await db.query(paymentStatusHasEvent('payment_id = NEW.id'));
    await db.query(`
      ALTER TABLE events
        DROP CONSTRAINT events_payment_id_fkey,
        DROP CONSTRAINT events_payment_type_key,
        ADD CONSTRAINT events_payment_type_key UNIQUE (payment_id, type),
        DROP CONSTRAINT events_pkey,
        ADD CONSTRAINT events_pkey PRIMARY KEY (id)`);

    await db.query(`DROP INDEX idempotency_keys_expires_at_idx`);
    await db.query(`CREATE INDEX idempotency_keys_expires_at_idx ON idempotency_keys (expires_at) WHERE expires_at IS NOT NULL`);
    await db.query(`
      ALTER TABLE idempotency_keys
        DROP CONSTRAINT idempotency_keys_payment_id_fkey,
        DROP CONSTRAINT idempotency_keys_payment_id_key,
        ADD CONSTRAINT idempotency_keys_payment_id_key UNIQUE (payment_id)`);
    await db.query(`
      ALTER TABLE payments
        DROP CONSTRAINT payments_provider_key_key,
        ADD CONSTRAINT payments_provider_key_key UNIQUE (provider_key),
        DROP CONSTRAINT payments_pkey,
        ADD CONSTRAINT payments_pkey PRIMARY KEY (id)`);

    await db.query(`
      ALTER TABLE idempotency_keys ADD CONSTRAINT idempotency_keys_payment_id_fkey
        FOREIGN KEY (payment_id) REFERENCES payments (id) DEFERRABLE INITIALLY DEFERRED`);
    await db.query(`ALTER TABLE events ADD CONSTRAINT events_payment_id_fkey FOREIGN KEY (payment_id) REFERENCES payments (id)`);
    await db.query(`
      ALTER TABLE webhook_deliveries
        ADD CONSTRAINT webhook_deliveries_event_id_fkey FOREIGN KEY (event_id) REFERENCES events (id),
        ADD CONSTRAINT webhook_deliveries_endpoint_id_fkey FOREIGN KEY (endpoint_id) REFERENCES webhook_endpoints (id)`);
  }
}

/**
 * The function behind payments_status_event_check (see MerchantEvents), with
 * the condition that finds the payment's events: by client too, so on a
 * sharded schema the check reads the payment's own shard.
 */
function paymentStatusHasEvent(ofThePayment: string): string {
  return `
    CREATE OR REPLACE FUNCTION payment_status_has_event() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NOT EXISTS (SELECT 1 FROM events WHERE ${ofThePayment} AND type = 'payment.' || NEW.status) THEN
        RAISE EXCEPTION 'payment % became % without its event', NEW.id, NEW.status
          USING ERRCODE = 'integrity_constraint_violation', CONSTRAINT = 'payments_status_event_check';
      END IF;
      RETURN NULL;
    END $$`;
}
