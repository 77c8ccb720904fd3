import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The events list in an order no later commit can go behind. created_at is
 * the writing transaction's start, so an event whose transaction started
 * first and committed last carried an earlier time than events a merchant had
 * already listed, and a merchant catching up newest-first stopped before it.
 *
 * Each event now keeps the id of the transaction that wrote it (xact_id), and
 * the list shows only events whose transaction is older than every one still
 * running (below the snapshot's xmin), in xact_id order: whatever becomes
 * visible later has a transaction id at or above that horizon, so it sorts
 * after everything already shown. Events already written all get this
 * migration's transaction id and keep their id order among themselves.
 */
export class EventsInCommitOrder1796600000000 implements MigrationInterface {
  name = 'EventsInCommitOrder1796600000000';

  async up(db: QueryRunner): Promise<void> {
    await db.query(`ALTER TABLE events ADD COLUMN xact_id xid8 NOT NULL DEFAULT pg_current_xact_id()`);
    await db.query(`DROP INDEX events_client_created_idx`);
    await db.query(`CREATE INDEX events_client_xact_idx ON events (client_id, xact_id DESC, id DESC)`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(`DROP INDEX events_client_xact_idx`);
    await db.query(`CREATE INDEX events_client_created_idx ON events (client_id, created_at DESC, id DESC)`);
    await db.query(`ALTER TABLE events DROP COLUMN xact_id`);
  }
}
