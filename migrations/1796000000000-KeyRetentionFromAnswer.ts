import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A key's retention counts from its stored answer, not from its claim: a key
 * whose payment is not final has no expiry at all, so however late a retry
 * comes it can never be taken for a new request and start a second payment.
 * The schema says so: a key expires if and only if it holds its answer.
 *
 * Keys already completed keep the retention they were given, counted from
 * their completion instead of their claim.
 */
export class KeyRetentionFromAnswer1796000000000 implements MigrationInterface {
  name = 'KeyRetentionFromAnswer1796000000000';

  async up(db: QueryRunner): Promise<void> {
    await db.query(`ALTER TABLE idempotency_keys ALTER COLUMN expires_at DROP NOT NULL`);
    await db.query(`UPDATE idempotency_keys SET expires_at = NULL WHERE completed_at IS NULL`);
    await db.query(`
      UPDATE idempotency_keys SET expires_at = completed_at + (expires_at - created_at)
       WHERE completed_at IS NOT NULL`);
    await db.query(`
      ALTER TABLE idempotency_keys ADD CONSTRAINT idempotency_keys_expiry_check
        CHECK ((expires_at IS NULL) = (completed_at IS NULL))`);
    await db.query(`DROP INDEX idempotency_keys_completed_expiry_idx`);
    await db.query(`CREATE INDEX idempotency_keys_expires_at_idx ON idempotency_keys (expires_at) WHERE expires_at IS NOT NULL`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(`DROP INDEX idempotency_keys_expires_at_idx`);
    await db.query(`
      CREATE INDEX idempotency_keys_completed_expiry_idx ON idempotency_keys (expires_at)
        WHERE completed_at IS NOT NULL`);
    await db.query(`ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_expiry_check`);
    // The old schema counted retention from the claim: give unfinished keys the default 24 h from theirs.
    await db.query(`UPDATE idempotency_keys SET expires_at = created_at + interval '24 hours' WHERE expires_at IS NULL`);
    await db.query(`ALTER TABLE idempotency_keys ALTER COLUMN expires_at SET NOT NULL`);
  }
}
