import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Refunds, the second idempotent operation, on the tables the first one uses.
 *
 * - refunds: one row per refund, with the columns every operation's row has
 *   (status, provider key, provider id, failure, reconciliation ladder,
 *   resolution, provider version, times), so the one outcome statement and
 *   the one reconciliation sweep work on it as on payments. It keeps the
 *   charge it refunds (provider_charge_id): the payment's, final and never
 *   changed once the payment succeeded.
 * - payments gain two running sums, written in the statements that change a
 *   refund: amount_reserved (refunds not failed: what is no longer left to
 *   refund) and amount_refunded (refunds succeeded). The claim of a refund
 *   raises amount_reserved under the payment row's lock, so concurrent
 *   refunds under different keys queue there, and the schema refuses any
 *   write that would take it past the amount: never more than the payment,
 *   whatever the code does.
 * - idempotency_keys and events name the row they belong to in one of two
 *   columns, payment_id or refund_id, exactly one set, each a foreign key
 *   into its own table: one key space and one outbox for every operation,
 *   with the database still checking every reference.
 * - status_has_event(): the commit-time check that a status change was
 *   announced, one function for both tables (its arguments name the event
 *   column and type prefix) in place of payment_status_has_event().
 */
export class Refunds1796700000000 implements MigrationInterface {
  name = 'Refunds1796700000000';

  async up(db: QueryRunner): Promise<void> {
    await db.query(`
      ALTER TABLE payments
        ADD COLUMN amount_reserved integer NOT NULL DEFAULT 0,
        ADD COLUMN amount_refunded integer NOT NULL DEFAULT 0,
        ADD CONSTRAINT payments_refunds_check
          CHECK (0 <= amount_refunded AND amount_refunded <= amount_reserved AND amount_reserved <= amount),
        ADD CONSTRAINT payments_refundable_check CHECK (amount_reserved = 0 OR status = 'succeeded')`);

    await db.query(`
      CREATE TABLE refunds (
        id                 text NOT NULL CONSTRAINT refunds_id_check CHECK (id ~ '^re_[0-9A-HJKMNP-TV-Z]{26}$'),
        client_id          uuid NOT NULL REFERENCES api_clients (id),
        payment_id         text NOT NULL,
        amount             integer NOT NULL CONSTRAINT refunds_amount_check CHECK (amount BETWEEN 1 AND 99999999),
        currency           char(3) NOT NULL CONSTRAINT refunds_currency_check CHECK (currency ~ '^[A-Z]{3}$'),
        reason             text CONSTRAINT refunds_reason_check
                           CHECK (reason IN ('duplicate', 'fraudulent', 'requested_by_customer')),
        metadata           jsonb NOT NULL DEFAULT '{}' CONSTRAINT refunds_metadata_check CHECK (payment_metadata_is_valid(metadata)),
        status             text NOT NULL DEFAULT 'pending'
                           CONSTRAINT refunds_status_check CHECK (status IN ('pending', 'succeeded', 'failed', 'requires_review')),
        provider_key       text NOT NULL,
        provider_charge_id text NOT NULL,
        provider_refund_id text CONSTRAINT refunds_provider_refund_id_check CHECK (length(provider_refund_id) BETWEEN 1 AND 255),
        failure_code       text CONSTRAINT refunds_failure_code_check CHECK (length(failure_code) BETWEEN 1 AND 100),
        failure_message    text,
        reconcile_attempts integer NOT NULL DEFAULT 0,
        next_reconcile_at  timestamptz NOT NULL DEFAULT now(),
        resolved_by        text,
        resolution_reason  text,
        provider_version   integer NOT NULL DEFAULT 0 CONSTRAINT refunds_provider_version_check CHECK (provider_version >= 0),
        created_at         timestamptz NOT NULL DEFAULT now(),
        updated_at         timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT refunds_pkey PRIMARY KEY (id, client_id),
        CONSTRAINT refunds_provider_key_key UNIQUE (provider_key, client_id),
        CONSTRAINT refunds_payment_id_fkey FOREIGN KEY (client_id, payment_id) REFERENCES payments (client_id, id),
        CONSTRAINT refunds_resolution_check CHECK ((resolved_by IS NULL) = (resolution_reason IS NULL))
      )`);
    await db.query(`CREATE INDEX refunds_client_created_idx ON refunds (client_id, created_at DESC, id DESC)`);
    await db.query(`CREATE INDEX refunds_payment_idx ON refunds (client_id, payment_id, created_at DESC, id DESC)`);
    await db.query(`
      CREATE INDEX refunds_due_idx ON refunds (next_reconcile_at) WHERE status IN ('pending', 'requires_review')`);

    await db.query(`
      ALTER TABLE idempotency_keys
        ALTER COLUMN payment_id DROP NOT NULL,
        ADD COLUMN refund_id text,
        ADD CONSTRAINT idempotency_keys_operation_check CHECK (num_nonnulls(payment_id, refund_id) = 1),
        ADD CONSTRAINT idempotency_keys_refund_id_key UNIQUE (client_id, refund_id),
        ADD CONSTRAINT idempotency_keys_refund_id_fkey FOREIGN KEY (client_id, refund_id)
          REFERENCES refunds (client_id, id) DEFERRABLE INITIALLY DEFERRED`);

    await db.query(`
      ALTER TABLE events
        ALTER COLUMN payment_id DROP NOT NULL,
        ADD COLUMN refund_id text,
        DROP CONSTRAINT events_type_check,
        ADD CONSTRAINT events_type_check CHECK (
          (payment_id IS NOT NULL AND refund_id IS NULL
             AND type IN ('payment.succeeded', 'payment.failed', 'payment.requires_review'))
          OR (refund_id IS NOT NULL AND payment_id IS NULL
             AND type IN ('refund.succeeded', 'refund.failed', 'refund.requires_review'))),
        ADD CONSTRAINT events_refund_type_key UNIQUE (client_id, refund_id, type),
        ADD CONSTRAINT events_refund_id_fkey FOREIGN KEY (client_id, refund_id) REFERENCES refunds (client_id, id)`);

    await db.query(`
      CREATE FUNCTION status_has_event() RETURNS trigger LANGUAGE plpgsql AS $$
      DECLARE
        announced boolean;
      BEGIN
        -- TG_ARGV[0]: the events column naming the row; TG_ARGV[1]: the event type's prefix.
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM events WHERE client_id = $1 AND %I = $2 AND type = $3)', TG_ARGV[0])
          INTO announced USING NEW.client_id, NEW.id, TG_ARGV[1] || '.' || NEW.status;
        IF NOT announced THEN
          RAISE EXCEPTION '% % became % without its event', TG_ARGV[1], NEW.id, NEW.status
            USING ERRCODE = 'integrity_constraint_violation', CONSTRAINT = TG_TABLE_NAME || '_status_event_check';
        END IF;
        RETURN NULL;
      END $$`);
    await db.query(`DROP TRIGGER payments_status_event_check ON payments`);
    await db.query(`DROP FUNCTION payment_status_has_event()`);
    for (const [table, column, prefix] of [
      ['payments', 'payment_id', 'payment'],
      ['refunds', 'refund_id', 'refund'],
    ]) {
      await db.query(`
        CREATE CONSTRAINT TRIGGER ${table}_status_event_check
          AFTER UPDATE OF status ON ${table} DEFERRABLE INITIALLY DEFERRED
          FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
          EXECUTE FUNCTION status_has_event('${column}', '${prefix}')`);
    }
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(`DROP TRIGGER refunds_status_event_check ON refunds`);
    await db.query(`DROP TRIGGER payments_status_event_check ON payments`);
    await db.query(`DROP FUNCTION status_has_event()`);
    await db.query(`
      CREATE FUNCTION payment_status_has_event() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NOT EXISTS (SELECT 1 FROM events WHERE client_id = NEW.client_id AND payment_id = NEW.id AND type = 'payment.' || NEW.status) THEN
          RAISE EXCEPTION 'payment % became % without its event', NEW.id, NEW.status
            USING ERRCODE = 'integrity_constraint_violation', CONSTRAINT = 'payments_status_event_check';
        END IF;
        RETURN NULL;
      END $$`);
    await db.query(`
      CREATE CONSTRAINT TRIGGER payments_status_event_check
        AFTER UPDATE OF status ON payments DEFERRABLE INITIALLY DEFERRED
        FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
        EXECUTE FUNCTION payment_status_has_event()`);

    // What only refunds wrote goes with them: their events (and those events' deliveries) and their keys.
    await db.query(`
      DELETE FROM webhook_deliveries d USING events e
       WHERE d.client_id = e.client_id AND d.event_id = e.id AND e.refund_id IS NOT NULL`);
    await db.query(`DELETE FROM events WHERE refund_id IS NOT NULL`);
    await db.query(`
      ALTER TABLE events
        DROP CONSTRAINT events_refund_id_fkey,
        DROP CONSTRAINT events_refund_type_key,
        DROP CONSTRAINT events_type_check,
        DROP COLUMN refund_id,
        ALTER COLUMN payment_id SET NOT NULL,
        ADD CONSTRAINT events_type_check CHECK (type IN ('payment.succeeded', 'payment.failed', 'payment.requires_review'))`);
    await db.query(`DELETE FROM idempotency_keys WHERE refund_id IS NOT NULL`);
    await db.query(`
      ALTER TABLE idempotency_keys
        DROP CONSTRAINT idempotency_keys_refund_id_fkey,
        DROP CONSTRAINT idempotency_keys_refund_id_key,
        DROP CONSTRAINT idempotency_keys_operation_check,
        DROP COLUMN refund_id,
        ALTER COLUMN payment_id SET NOT NULL`);
    await db.query(`DROP TABLE refunds`);
    await db.query(`
      ALTER TABLE payments
        DROP CONSTRAINT payments_refundable_check,
        DROP CONSTRAINT payments_refunds_check,
        DROP COLUMN amount_refunded,
        DROP COLUMN amount_reserved`);
  }
}
