import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The transactional outbox that tells merchants what happened to their payments:
 *
 * - events: one row per status a payment takes after pending, written in the
 *   transaction that changes the status. One event per (payment, type): a
 *   status change is announced under one event id, never two. A constraint
 *   trigger, checked at commit, refuses a status change whose event is
 *   missing, so no code path (nor a hand-written UPDATE) can move a payment
 *   without telling the merchant;
 * - webhook_endpoints: where a client's events are pushed, with the secret
 *   they are signed with (kept in clear: signing needs it);
 * - webhook_deliveries: one row per (event, endpoint), written with the event.
 *   Postgres, not Redis, says what is still to deliver: a claim (token and
 *   expiry) marks a send in flight, and an expired claim is taken again.
 */
export class MerchantEvents1796300000000 implements MigrationInterface {
  name = 'MerchantEvents1796300000000';

  async up(db: QueryRunner): Promise<void> {
    await db.query(`
      CREATE TABLE events (
        id         text PRIMARY KEY CONSTRAINT events_id_check CHECK (id ~ '^evt_[0-9A-HJKMNP-TV-Z]{26}$'),
        client_id  uuid NOT NULL REFERENCES api_clients (id),
        type       text NOT NULL
                   CONSTRAINT events_type_check
                   CHECK (type IN ('payment.succeeded', 'payment.failed', 'payment.requires_review')),
        payment_id text NOT NULL REFERENCES payments (id),
        data       json NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT events_payment_type_key UNIQUE (payment_id, type)
      )`);
    await db.query(`CREATE INDEX events_client_created_idx ON events (client_id, created_at DESC, id DESC)`);

    await db.query(`
      CREATE FUNCTION payment_status_has_event() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NOT EXISTS (SELECT 1 FROM events WHERE payment_id = NEW.id AND type = 'payment.' || NEW.status) THEN
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

    await db.query(`
      CREATE TABLE webhook_endpoints (
        id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        client_id  uuid NOT NULL REFERENCES api_clients (id) CONSTRAINT webhook_endpoints_client_key UNIQUE,
        url        text NOT NULL CONSTRAINT webhook_endpoints_url_check CHECK (url ~ '^https?://'),
        secret     text NOT NULL CONSTRAINT webhook_endpoints_secret_check CHECK (secret ~ '^whsec_'),
        created_at timestamptz NOT NULL DEFAULT now()
      )`);

    await db.query(`
      CREATE TABLE webhook_deliveries (
        event_id        text NOT NULL REFERENCES events (id),
        endpoint_id     uuid NOT NULL REFERENCES webhook_endpoints (id),
        client_id       uuid NOT NULL REFERENCES api_clients (id),
        status          text NOT NULL DEFAULT 'pending'
                        CONSTRAINT webhook_deliveries_status_check CHECK (status IN ('pending', 'delivered', 'failed')),
        attempts        integer NOT NULL DEFAULT 0 CONSTRAINT webhook_deliveries_attempts_check CHECK (attempts >= 0),
        next_attempt_at timestamptz NOT NULL DEFAULT now(),
        claim_token     uuid,
        claimed_until   timestamptz,
        last_error      text,
        delivered_at    timestamptz,
        created_at      timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (event_id, endpoint_id),
        CONSTRAINT webhook_deliveries_claim_check CHECK ((claim_token IS NULL) = (claimed_until IS NULL)),
        CONSTRAINT webhook_deliveries_delivered_check CHECK ((status = 'delivered') = (delivered_at IS NOT NULL)),
        CONSTRAINT webhook_deliveries_settled_check CHECK (status = 'pending' OR claim_token IS NULL)
      )`);
    await db.query(`
      CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at) WHERE status = 'pending'`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(`DROP TABLE webhook_deliveries`);
    await db.query(`DROP TABLE webhook_endpoints`);
    await db.query(`DROP TRIGGER payments_status_event_check ON payments`);
    await db.query(`DROP FUNCTION payment_status_has_event()`);
    await db.query(`DROP TABLE events`);
  }
}
