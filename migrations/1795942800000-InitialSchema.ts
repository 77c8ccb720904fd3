import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The invariants live in the schema, where no code path can skip them:
 * - one idempotency key per (client, key): the primary key is the claim;
 * - one provider key per payment, so the provider can never see two charges
 *   for one payment;
 * - one payment that did not fail per (client, order): the business fact;
 * - a completed key holds a response and no lease.
 */
export class InitialSchema1795942800000 implements MigrationInterface {
  name = 'InitialSchema1795942800000';

  async up(db: QueryRunner): Promise<void> {
    await db.query(`
      CREATE TABLE api_clients (
        id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        name         text NOT NULL CONSTRAINT api_clients_name_check CHECK (length(name) BETWEEN 1 AND 100),
        api_key_hash char(64) NOT NULL CONSTRAINT api_clients_api_key_hash_key UNIQUE,
        created_at   timestamptz NOT NULL DEFAULT now()
      )`);

    await db.query(`
      CREATE TABLE payments (
        id                 text PRIMARY KEY,
        client_id          uuid NOT NULL REFERENCES api_clients (id),
        amount             integer NOT NULL CONSTRAINT payments_amount_check CHECK (amount BETWEEN 1 AND 99999999),
        currency           char(3) NOT NULL CONSTRAINT payments_currency_check CHECK (currency ~ '^[A-Z]{3}$'),
        payment_method     text NOT NULL,
        order_id           text CONSTRAINT payments_order_id_check CHECK (length(order_id) BETWEEN 1 AND 64),
        description        text,
        metadata           jsonb NOT NULL DEFAULT '{}',
        status             text NOT NULL DEFAULT 'pending'
                           CONSTRAINT payments_status_check
                           CHECK (status IN ('pending', 'succeeded', 'failed', 'requires_review')),
        provider_key       text NOT NULL CONSTRAINT payments_provider_key_key UNIQUE,
        provider_charge_id text,
        failure_code       text,
        failure_message    text,
        reconcile_attempts integer NOT NULL DEFAULT 0,
        next_reconcile_at  timestamptz NOT NULL DEFAULT now(),
        created_at         timestamptz NOT NULL DEFAULT now(),
        updated_at         timestamptz NOT NULL DEFAULT now()
      )`);
    await db.query(`
      CREATE UNIQUE INDEX payments_client_order_active_key ON payments (client_id, order_id)
        WHERE order_id IS NOT NULL AND status <> 'failed'`);
    await db.query(`CREATE INDEX payments_client_created_idx ON payments (client_id, created_at DESC, id DESC)`);
    await db.query(`CREATE INDEX payments_pending_due_idx ON payments (next_reconcile_at) WHERE status = 'pending'`);

    await db.query(`
      CREATE TABLE idempotency_keys (
        client_id       uuid NOT NULL REFERENCES api_clients (id),
        key             varchar(255) NOT NULL,
        fingerprint     char(64) NOT NULL,
        -- The key is claimed before its payment is inserted, in the same transaction.
        payment_id      text NOT NULL REFERENCES payments (id) DEFERRABLE INITIALLY DEFERRED,
        lease_token     uuid,
        leased_until    timestamptz,
        response_status smallint,
        response_body   text,
        created_at      timestamptz NOT NULL DEFAULT now(),
        completed_at    timestamptz,
        expires_at      timestamptz NOT NULL,
        PRIMARY KEY (client_id, key),
        CONSTRAINT idempotency_keys_payment_id_key UNIQUE (payment_id),
        CONSTRAINT idempotency_keys_response_check CHECK (
          (response_status IS NULL AND response_body IS NULL AND completed_at IS NULL)
          OR (response_status IS NOT NULL AND response_body IS NOT NULL AND completed_at IS NOT NULL
              AND lease_token IS NULL AND leased_until IS NULL)),
        CONSTRAINT idempotency_keys_lease_check CHECK ((lease_token IS NULL) = (leased_until IS NULL))
      )`);
    await db.query(`
      CREATE INDEX idempotency_keys_completed_expiry_idx ON idempotency_keys (expires_at)
        WHERE completed_at IS NOT NULL`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(`DROP TABLE idempotency_keys`);
    await db.query(`DROP TABLE payments`);
    await db.query(`DROP TABLE api_clients`);
  }
}
