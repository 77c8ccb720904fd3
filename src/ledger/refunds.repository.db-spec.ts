import type { EntityManager } from 'typeorm';
import { eventually } from '../../test/support/eventually';
import { useLedgerFixtures } from '../../test/support/ledger-fixtures';
import { loadConfig } from '../config/app-config';
import type { Refund } from './refunds.table';
import { decisionOf } from './ledger.service';
import type { FinalOutcome } from './outcome';
import { PAYMENTS, REFUNDS } from './operations';

/**
 * A refund's phase 1 (RefundsRepository.insertPendingUnderClaim) against
 * writes of its payment that commit while it waits for the payment's lock:
 * the statement's snapshot saw the payment as it was before them, the lock
 * gives it the row as they left it. The refusals, the concurrent refunds of
 * one payment and the replays are test/refunds.e2e-spec.ts's.
 */
describe('RefundsRepository on Postgres', () => {
  const db = useLedgerFixtures();

  /**
   * Runs `write` in a transaction left open, starts `refund` (which must
   * wait for the row `write` changed), waits until it does, commits, and
   * gives what the refund came to.
   */
  async function refundWaitingFor(write: (tx: EntityManager) => Promise<void>, refund: () => Promise<{ refund: Refund }>): Promise<Refund> {
    const holder = db.dataSource.createQueryRunner();
    await holder.connect();
    try {
      await holder.startTransaction();
      await write(holder.manager);
      const [{ pid }] = (await holder.query('SELECT pg_backend_pid() AS pid')) as { pid: number }[];
      const refunded = refund();
      await eventually(
        async () => {
          const [{ waiting }] = (await db.dataSource.query(
            `SELECT count(*)::int AS waiting FROM pg_stat_activity WHERE pg_blocking_pids(pid) @> ARRAY[$1::int]`,
            [pid],
          )) as { waiting: number }[];
          return waiting === 1 ? true : undefined;
        },
        { what: 'the refund to wait for the payment’s row' },
      );
      await holder.commitTransaction();
      return (await refunded).refund;
    } finally {
      await holder.release();
    }
  }

  // Built on the row the statement's snapshot saw plus what the locked row
  // says, the reservation would break a check of the payments table before
  // Postgres rechecked it on the newest row: a 500 for the client.

  it('reserves all that is left once the lock is free: a failed refund’s amount given back meanwhile included', async () => {
    const { payment } = await db.given.succeeded(db.clientId);
    const first = await db.given.claimedRefund(payment, 300);
    const failed: FinalOutcome = { status: 'failed', providerId: 'rf_1', failureCode: 'refund_declined', failureMessage: 'no' };

    const refund = await refundWaitingFor(
      async (tx) => {
        const decision = decisionOf(REFUNDS, first.refund, failed, loadConfig({}));
        expect(await db.given.rows.recordOutcomeUnderLease(tx, REFUNDS, first.lease, first.refund, decision)).toMatchObject({ kind: 'recorded' });
      },
      () => db.given.claimedRefund(payment),
    );

    // Old row: 300 reserved; locked row: 500 left (payments_refunds_check).
    expect(refund).toMatchObject({ amount: 500, status: 'pending' });
    expect(await db.given.paymentById(payment.id)).toMatchObject({ amountReserved: 500, amountRefunded: 0 });
  });

  it('refunds a payment that succeeded while the refund waited for its row', async () => {
    const { lease, payment } = await db.given.claimed(db.clientId);
    const succeeded: FinalOutcome = { status: 'succeeded', providerId: 'ch_1' };

    const refund = await refundWaitingFor(
      async (tx) => {
        const decision = decisionOf(PAYMENTS, payment, succeeded, loadConfig({}));
        expect(await db.given.rows.recordOutcomeUnderLease(tx, PAYMENTS, lease, payment, decision)).toMatchObject({ kind: 'recorded' });
      },
      () => db.given.claimedRefund(payment, 200),
    );

    // Old row: pending; locked row: succeeded (payments_refundable_check).
    expect(refund).toMatchObject({ amount: 200, status: 'pending', providerChargeId: 'ch_1' });
    expect(await db.given.paymentById(payment.id)).toMatchObject({ status: 'succeeded', amountReserved: 200, amountRefunded: 0 });
  });
});
