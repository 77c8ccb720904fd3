import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Provider events are delivered at least once and in any order; consuming
 * them idempotently needs two records, each written in the same transaction
 * as the event's effect:
 *
 * - processed_messages: one row per (consumer, message id) ever applied, so a
 *   duplicate delivery finds its row and changes nothing;
 * - payments.provider_version: the version of the provider's charge last
 *   applied, so an older event arriving late changes nothing either.
 */
export class ProviderEvents1796200000000 implements MigrationInterface {
  name = 'ProviderEvents1796200000000';

  async up(db: QueryRunner): Promise<void> {
    await db.query(`
      CREATE TABLE processed_messages (
        consumer     text NOT NULL,
        message_id   text NOT NULL,
        processed_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (consumer, message_id)
      )`);
    await db.query(`
      ALTER TABLE payments
        ADD COLUMN provider_version integer NOT NULL DEFAULT 0
        CONSTRAINT payments_provider_version_check CHECK (provider_version >= 0)`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(`ALTER TABLE payments DROP COLUMN provider_version`);
    await db.query(`DROP TABLE processed_messages`);
  }
}
