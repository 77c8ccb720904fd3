import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * requires_review is not an end: the worker keeps asking the provider, and a
 * definitive answer (or an operator's resolution) moves the payment once to
 * succeeded or failed. So a review payment is due for reconciliation like a
 * pending one, and its key holds no answer until the payment is final: a retry
 * meanwhile is told the current state, not a stored 202.
 *
 * An operator's resolution records who and why, both or neither.
 */
export class ReviewIsAState1796100000000 implements MigrationInterface {
  name = 'ReviewIsAState1796100000000';

  async up(db: QueryRunner): Promise<void> {
    await db.query(`DROP INDEX payments_pending_due_idx`);
    await db.query(`
      CREATE INDEX payments_due_idx ON payments (next_reconcile_at)
        WHERE status IN ('pending', 'requires_review')`);
    await db.query(`
      ALTER TABLE payments
        ADD COLUMN resolved_by text,
        ADD COLUMN resolution_reason text,
        ADD CONSTRAINT payments_resolution_check CHECK ((resolved_by IS NULL) = (resolution_reason IS NULL))`);
    // Reviews from before: reopen their keys and re-check them at once.
    await db.query(`
      UPDATE idempotency_keys k
         SET response_status = NULL, response_body = NULL, completed_at = NULL, expires_at = NULL
        FROM payments p
       WHERE p.id = k.payment_id AND p.status = 'requires_review'`);
    await db.query(`UPDATE payments SET next_reconcile_at = now() WHERE status = 'requires_review'`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(`
      ALTER TABLE payments
        DROP CONSTRAINT payments_resolution_check,
        DROP COLUMN resolution_reason,
        DROP COLUMN resolved_by`);
    await db.query(`DROP INDEX payments_due_idx`);
    await db.query(`CREATE INDEX payments_pending_due_idx ON payments (next_reconcile_at) WHERE status = 'pending'`);
  }
}
