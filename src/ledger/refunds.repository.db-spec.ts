import { eventually } from '../../test/support/eventually';
import { LedgerFixtures, useLedgerFixtures } from '../../test/support/ledger-fixtures';
import { loadConfig } from '../config/app-config';
import { decisionOf } from './ledger.service';
import { REFUNDS } from './operations';

/**
 * A refund's phase 1 (RefundsRepository.insertPendingUnderClaim) against
 * writes of its payment that commit while it waits for the payment's lock.
 * The refusals, the concurrent refunds of one payment and the replays are
 * test/refunds.e2e-spec.ts's.
 */
describe('RefundsRepository on Postgres', () => {
  const db = useLedgerFixtures();
  let given: LedgerFixtures;
  let clientId: string;

  beforeEach(() => {
    ({ given, clientId } = db);
  });

  it('reserves all that is left as the payment is once its lock is free: a failed refund’s amount given back meanwhile included', async () => {
    const { payment } = await given.succeeded(clientId);
    const first = await given.claimedRefund(payment, 300);
    const failed = { status: 'failed', providerId: 'rf_1', failureCode: 'refund_declined', failureMessage: 'no' } as const;

    // The first refund's outcome gives its 300 back in a transaction left
    // open, so the payment's row stays locked with the change uncommitted.
    const holder = db.dataSource.createQueryRunner();
    await holder.connect();
    try {
      await holder.startTransaction();
      const decided = await given.rows.recordOutcomeUnderLease(
        holder.manager,
        REFUNDS,
        first.lease,
        first.refund,
        decisionOf(REFUNDS, first.refund, failed, loadConfig({})),
      );
      expect(decided).toMatchObject({ kind: 'recorded' });

      // A second refund of all that is left: its statement starts while 300
      // are still reserved, and waits for the row.
      const second = given.claimedRefund(payment);
      await eventually(
        async () => {
          const [{ waiting }] = (await db.dataSource.query(
            `SELECT count(*)::int AS waiting FROM pg_stat_activity
              WHERE datname = current_database() AND wait_event_type = 'Lock'`,
          )) as { waiting: number }[];
          return waiting === 1 ? true : undefined;
        },
        { what: 'the second refund to wait for the payment’s row' },
      );
      await holder.commitTransaction();

      // Built on the row its statement first saw (300 reserved) plus the 500
      // now left, the reservation would break payments_refunds_check (800 of
      // 500) before Postgres rechecked it on the newest row: a 500 for the client.
      expect((await second).refund).toMatchObject({ amount: 500, status: 'pending' });
    } finally {
      await holder.release();
    }
    expect(await given.paymentById(payment.id)).toMatchObject({ amountReserved: 500, amountRefunded: 0 });
  });
});
