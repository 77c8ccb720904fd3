import { QueryFailedError } from 'typeorm';
import { LedgerFixtures, useLedgerFixtures } from '../../test/support/ledger-fixtures';
import { isUniqueViolation } from '../database/sql';
import { ACTIVE_ORDER_INDEX } from './payments.table';

describe('PaymentsRepository on Postgres', () => {
  const db = useLedgerFixtures();
  let given: LedgerFixtures;
  let clientId: string;

  beforeEach(() => {
    ({ given, clientId } = db);
  });

  const payments = () => given.payments;
  const manager = () => db.dataSource.manager;

  it('inserts a pending payment and reads it back in the record’s shape', async () => {
    const { payment } = await given.claimed(clientId, 'k1', 'ord_1');

    expect(payment).toMatchObject({
      clientId,
      amount: 500,
      currency: 'USD',
      orderId: 'ord_1',
      metadata: { order: 'a' },
      status: 'pending',
      providerKey: `pk_${payment.id}`,
      providerChargeId: null,
      reconcileAttempts: 0,
    });
    expect(payment.createdAt).toBeInstanceOf(Date);
    expect(await payments().findForClient(manager(), clientId, payment.id)).toEqual(payment);
  });

  it('keeps one payment that did not fail per order, and frees the order when it fails', async () => {
    const first = await given.claimed(clientId, 'k1', 'ord_1');

    const second = await given.claimed(clientId, 'k2', 'ord_1').catch((error: unknown) => error);
    expect(second).toBeInstanceOf(QueryFailedError);
    expect(isUniqueViolation(second, ACTIVE_ORDER_INDEX)).toBe(true);

    await given.transitioned(first.payment, {
      status: 'failed',
      providerChargeId: 'ch_1',
      failureCode: 'card_declined',
      failureMessage: 'The card was declined.',
    });
    await expect(given.claimed(clientId, 'k3', 'ord_1')).resolves.toBeDefined();
  });

  describe('transition', () => {
    it('moves a pending payment once; a final payment never changes again', async () => {
      const { payment } = await given.claimed(clientId);

      const settled = await given.transitioned(payment, {
        status: 'succeeded',
        providerChargeId: 'ch_1',
      });
      const overturned = await given.transitioned(payment, {
        status: 'failed',
        providerChargeId: 'ch_2',
        failureCode: 'card_declined',
        failureMessage: 'The card was declined.',
      });

      expect(settled).toMatchObject({ status: 'succeeded', providerChargeId: 'ch_1', failureCode: null });
      expect(overturned).toBeUndefined();
      expect(await given.paymentById(payment.id)).toMatchObject({ status: 'succeeded', providerChargeId: 'ch_1' });
    });
  });

  describe('transition out of review', () => {
    it('leaves review once, for a final status only', async () => {
      const { payment } = await given.claimed(clientId);
      const review = { status: 'requires_review', failureCode: 'x', failureMessage: 'x' } as const;
      await given.transitioned(payment, review);

      expect(await given.transitioned(payment, review)).toBeUndefined();
      expect(
        await given.transitioned(payment, { status: 'succeeded', providerChargeId: 'ch_9' }),
      ).toMatchObject({ status: 'succeeded', providerChargeId: 'ch_9', failureCode: null });
      expect(await given.transitioned(payment, review)).toBeUndefined();
    });
  });

  describe('findDueForReconciliation', () => {
    it('finds pending payments past the stale age, due on their ladder and not leased, oldest due first', async () => {
      const due = await Promise.all([1, 2].map(() => given.claimed(clientId)));
      for (const { lease } of due) await given.expireLease(lease);
      await db.dataSource.query(`UPDATE payments SET next_reconcile_at = now() - interval '1 minute' WHERE id = $1`, [
        due[1].payment.id,
      ]);
      const leased = await given.claimed(clientId);
      const notYetDue = await given.claimed(clientId);
      await given.expireLease(notYetDue.lease);
      await payments().scheduleReconciliation(manager(), notYetDue.payment, { delayMs: 60_000, countAttempt: true });
      const final = await given.succeeded(clientId);
      const inReview = await given.claimed(clientId);
      await given.expireLease(inReview.lease);
      await given.transitioned(inReview.payment, {
        status: 'requires_review',
        failureCode: 'x',
        failureMessage: 'x',
      });
      await db.dataSource.query(`UPDATE payments SET next_reconcile_at = now() - interval '2 minutes' WHERE id = $1`, [
        inReview.payment.id,
      ]);

      const found = await payments().findDueForReconciliation(manager(), 0, 10);

      // Each named by its client too: the work on it runs on that client's shard.
      expect(found).toEqual([inReview.payment, due[1].payment, due[0].payment].map(({ id }) => ({ clientId, id })));
      const ids = found.map(({ id }) => id);
      expect(ids).not.toContain(leased.payment.id);
      expect(ids).not.toContain(final.payment.id);
      expect(await payments().findDueForReconciliation(manager(), 0, 1)).toEqual([{ clientId, id: inReview.payment.id }]);
      expect(await payments().findDueForReconciliation(manager(), 3_600_000, 10)).toEqual([]);
    });

    it('passes over the payments a sweep has already queued', async () => {
      const due = await Promise.all([1, 2, 3].map(() => given.claimed(clientId)));
      for (const { lease } of due) await given.expireLease(lease);

      const found = await payments().findDueForReconciliation(manager(), 0, 10, [due[0].payment.id, due[2].payment.id]);

      expect(found).toEqual([{ clientId, id: due[1].payment.id }]);
    });
  });

  describe('scheduleReconciliation', () => {
    it('counts the attempt unless told not to, and leaves final payments alone', async () => {
      const { payment } = await given.claimed(clientId);
      const final = await given.succeeded(clientId);

      await payments().scheduleReconciliation(manager(), payment, { delayMs: 5_000, countAttempt: true });
      await payments().scheduleReconciliation(manager(), payment, { delayMs: 5_000, countAttempt: false });
      await payments().scheduleReconciliation(manager(), final.payment, { delayMs: 5_000, countAttempt: true });

      const rescheduled = await given.paymentById(payment.id);
      expect(rescheduled?.reconcileAttempts).toBe(1);
      const [{ ahead_ms: aheadMs }]: { ahead_ms: number }[] = await db.dataSource.query(
        `SELECT extract(epoch FROM next_reconcile_at - now()) * 1000 AS ahead_ms FROM payments WHERE id = $1`,
        [payment.id],
      );
      expect(Number(aheadMs)).toBeGreaterThan(4_000);
      expect(Number(aheadMs)).toBeLessThanOrEqual(5_000);
      expect((await given.paymentById(final.payment.id))?.reconcileAttempts).toBe(0);
    });
  });

  it("schedules 'never': the payment is not due again", async () => {
    const { lease, payment } = await given.claimed(clientId);
    await given.expireLease(lease);

    await payments().scheduleReconciliation(manager(), payment, { delayMs: 'never', countAttempt: false });

    const [{ never }]: { never: boolean }[] = await db.dataSource.query(
      `SELECT next_reconcile_at = 'infinity' AS never FROM payments WHERE id = $1`,
      [payment.id],
    );
    expect(never).toBe(true);
    expect(await payments().findDueForReconciliation(manager(), 0, 10)).toEqual([]);
  });

  describe('listForClient', () => {
    it('pages newest first after a cursor, scoped to the client', async () => {
      const made = [];
      for (let index = 0; index < 3; index++) made.push((await given.claimed(clientId)).payment.id);
      await given.claimed(await given.client());

      const first = await payments().listForClient(manager(), clientId, { limit: 2 });
      const second = await payments().listForClient(manager(), clientId, { limit: 2, startingAfter: made[1] });

      expect(first.payments.map((payment) => payment.id)).toEqual([made[2], made[1]]);
      expect(first.hasMore).toBe(true);
      expect(second.payments.map((payment) => payment.id)).toEqual([made[0]]);
      expect(second.hasMore).toBe(false);
    });
  });
});
