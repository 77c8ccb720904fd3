import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Every lookup of one row by its key has exactly one index that can serve
 * it, so that a plan made once for every value (see `planOnce` in
 * src/database/sql.ts) cannot pick another. What the schema accepts and
 * refuses is unchanged.
 *
 * Left to weigh two usable indexes, Postgres does so by their estimated
 * costs, and while a table is small those tie: a plan made then, and kept
 * for the session, found a payment by `client_id = $1 AND id = $2` through
 * `payments_client_created_idx`, which reads every payment of the client to
 * find one, and a key through `idempotency_keys_refund_id_key` (all of the
 * client's keys).
 *
 * - The unique indexes of a column that is null in most rows (a key names a
 *   payment or a refund; an event a payment or a refund) now index only the
 *   rows that have it. A lookup by that column implies it is not null and
 *   still uses the index; a lookup by the key does not, and cannot.
 * - The list indexes (newest first) index rows `WHERE created_at IS NOT
 *   NULL`, true of every row: a statement that wants one says so (the list
 *   queries do), and a lookup by id cannot reach it.
 * - The commit-time event check (status_has_event) is planned at each call:
 *   its lookup could be served by the events' primary key and list index as
 *   well as by the unique index it means, and it costs little to plan.
 */
export class OneIndexPerLookup1797300000000 implements MigrationInterface {
  name = 'OneIndexPerLookup1797300000000';

  async up(db: QueryRunner): Promise<void> {
    await db.query(`
      ALTER TABLE idempotency_keys
        DROP CONSTRAINT idempotency_keys_payment_id_key,
        DROP CONSTRAINT idempotency_keys_refund_id_key`);
    await db.query(`CREATE UNIQUE INDEX idempotency_keys_payment_id_key ON idempotency_keys (client_id, payment_id) WHERE payment_id IS NOT NULL`);
    await db.query(`CREATE UNIQUE INDEX idempotency_keys_refund_id_key ON idempotency_keys (client_id, refund_id) WHERE refund_id IS NOT NULL`);
    await db.query(`ALTER TABLE events DROP CONSTRAINT events_payment_type_key, DROP CONSTRAINT events_refund_type_key`);
    await db.query(`CREATE UNIQUE INDEX events_payment_type_key ON events (client_id, payment_id, type) WHERE payment_id IS NOT NULL`);
    await db.query(`CREATE UNIQUE INDEX events_refund_type_key ON events (client_id, refund_id, type) WHERE refund_id IS NOT NULL`);
    for (const [name, columns] of LIST_INDEXES) {
      await db.query(`DROP INDEX ${name}`);
      await db.query(`CREATE INDEX ${name} ON ${columns} WHERE created_at IS NOT NULL`);
    }
    await db.query(`ALTER FUNCTION status_has_event() SET plan_cache_mode = force_custom_plan`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(`ALTER FUNCTION status_has_event() RESET plan_cache_mode`);
    for (const [name, columns] of LIST_INDEXES) {
      await db.query(`DROP INDEX ${name}`);
      await db.query(`CREATE INDEX ${name} ON ${columns}`);
    }
    await db.query(`DROP INDEX events_payment_type_key, events_refund_type_key`);
    await db.query(`
      ALTER TABLE events
        ADD CONSTRAINT events_payment_type_key UNIQUE (client_id, payment_id, type),
        ADD CONSTRAINT events_refund_type_key UNIQUE (client_id, refund_id, type)`);
    await db.query(`DROP INDEX idempotency_keys_payment_id_key, idempotency_keys_refund_id_key`);
    await db.query(`
      ALTER TABLE idempotency_keys
        ADD CONSTRAINT idempotency_keys_payment_id_key UNIQUE (client_id, payment_id),
        ADD CONSTRAINT idempotency_keys_refund_id_key UNIQUE (client_id, refund_id)`);
  }
}

/** The indexes behind the newest-first lists, as created before this migration. */
const LIST_INDEXES = [
  ['payments_client_created_idx', 'payments (client_id, created_at DESC, id DESC)'],
  ['refunds_client_created_idx', 'refunds (client_id, created_at DESC, id DESC)'],
  ['refunds_payment_idx', 'refunds (client_id, payment_id, created_at DESC, id DESC)'],
] as const;
