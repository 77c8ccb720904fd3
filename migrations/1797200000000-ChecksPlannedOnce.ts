import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The two functions the schema runs on every payment and refund write, made
 * to plan their queries once per session instead of on every call; what they
 * accept and refuse is unchanged.
 *
 * - payment_metadata_is_valid(), behind the metadata checks of payments and
 *   refunds, is evaluated on every insert and every update of a row (a check
 *   runs whatever columns the update sets). As a SQL function with a
 *   subquery it cannot be inlined, and Postgres planned its body again in
 *   every statement that called it: about 0.3 ms of the database's time per
 *   call, twice per payment. PL/pgSQL keeps the plan for the session.
 * - status_has_event(), the commit-time check that a status change was
 *   announced, ran its lookup as dynamic SQL (EXECUTE format(…)), parsed and
 *   planned at every commit. It now branches on the column its trigger names
 *   to one of two static queries, each planned once per session.
 */
export class ChecksPlannedOnce1797200000000 implements MigrationInterface {
  name = 'ChecksPlannedOnce1797200000000';

  async up(db: QueryRunner): Promise<void> {
    // At most 20 keys of 1 to 40 code points, each a string of at most 500.
    // CASE, not AND: jsonb_each must not see anything but an object.
    await db.query(`
      CREATE OR REPLACE FUNCTION payment_metadata_is_valid(metadata jsonb) RETURNS boolean
        LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
        BEGIN
          RETURN CASE WHEN jsonb_typeof(metadata) <> 'object' THEN false ELSE
            (SELECT count(*) <= 20
                    AND bool_and(length(key) BETWEEN 1 AND 40
                                 AND jsonb_typeof(value) = 'string'
                                 AND length(value #>> '{}') <= 500) IS NOT FALSE
               FROM jsonb_each(metadata))
          END;
        END $$`);
    await db.query(`
      CREATE OR REPLACE FUNCTION status_has_event() RETURNS trigger LANGUAGE plpgsql AS $$
      DECLARE
        event_type text := TG_ARGV[1] || '.' || NEW.status;
        announced boolean;
      BEGIN
        -- TG_ARGV[0]: the events column naming the row; TG_ARGV[1]: the event type's prefix.
        IF TG_ARGV[0] = 'payment_id' THEN
          announced := EXISTS (SELECT 1 FROM events e WHERE e.client_id = NEW.client_id AND e.payment_id = NEW.id AND e.type = event_type);
        ELSIF TG_ARGV[0] = 'refund_id' THEN
          announced := EXISTS (SELECT 1 FROM events e WHERE e.client_id = NEW.client_id AND e.refund_id = NEW.id AND e.type = event_type);
        ELSE
          RAISE EXCEPTION 'status_has_event: no events column %', TG_ARGV[0];
        END IF;
        IF NOT announced THEN
          RAISE EXCEPTION '% % became % without its event', TG_ARGV[1], NEW.id, NEW.status
            USING ERRCODE = 'integrity_constraint_violation', CONSTRAINT = TG_TABLE_NAME || '_status_event_check';
        END IF;
        RETURN NULL;
      END $$`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(`
      CREATE OR REPLACE FUNCTION status_has_event() RETURNS trigger LANGUAGE plpgsql AS $$
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
    await db.query(`
      CREATE OR REPLACE FUNCTION payment_metadata_is_valid(metadata jsonb) RETURNS boolean
        LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
          SELECT CASE WHEN jsonb_typeof(metadata) <> 'object' THEN false ELSE
            (SELECT count(*) <= 20
                    AND bool_and(length(key) BETWEEN 1 AND 40
                                 AND jsonb_typeof(value) = 'string'
                                 AND length(value #>> '{}') <= 500) IS NOT FALSE
               FROM jsonb_each(metadata))
          END
        $$`);
  }
}
