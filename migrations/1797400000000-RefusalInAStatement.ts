import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * refusal(reason, detail): raises, so that the statement calling it fails
 * and writes nothing. A refund's phase 1 (the key's claim, the payment's
 * lock, the reservation and the pending refund) is one statement; when the
 * payment cannot be refunded as asked, that statement calls refusal() and
 * Postgres undoes the claim with the rest, with no transaction to open or
 * roll back. SQLSTATE `PR001`, the reason as the message, the detail (the
 * payment's status, or the amount left) as DETAIL; see
 * RefundsRepository.insertPendingUnderClaim.
 *
 * Volatile (the default), so that it is only ever called when a row reaches
 * it, never folded into a plan. Returns an integer only so that it can stand
 * in a CASE beside an amount.
 */
export class RefusalInAStatement1797400000000 implements MigrationInterface {
  name = 'RefusalInAStatement1797400000000';

  async up(db: QueryRunner): Promise<void> {
    await db.query(`
      CREATE FUNCTION refusal(reason text, detail text) RETURNS integer LANGUAGE plpgsql AS $$
        BEGIN
          RAISE EXCEPTION USING ERRCODE = 'PR001', MESSAGE = reason, DETAIL = coalesce(detail, '');
        END $$`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(`DROP FUNCTION refusal(text, text)`);
  }
}
