import { randomUUID } from 'node:crypto';
import type { EntityManager } from 'typeorm';
import { FINGERPRINT, LEASE_MS, LedgerFixtures, useLedgerFixtures } from '../../test/support/ledger-fixtures';
import { loadConfig } from '../config/app-config';
import type { Lease } from './lease';
import { decisionOf } from './ledger.service';
import { PAYMENTS, REFUNDS } from './operations';
import type { FinalOutcome } from './outcome';
import { newPaymentId, providerKeyFor } from './payment-id';
import { finalResponseFor } from './payment-outcome';
import type { Payment } from './payments.table';
import { finalRefundResponseFor } from './refund-outcome';

/**
 * The statements every operation shares (OperationsRepository), on payments
 * (PAYMENTS) and, where a refund's row behaves differently, on refunds (REFUNDS).
 */
describe('OperationsRepository on Postgres', () => {
  const db = useLedgerFixtures();
  let given: LedgerFixtures;
  let clientId: string;

  beforeEach(() => {
    ({ given, clientId } = db);
  });

  const rows = () => given.rows;
  const manager = () => db.dataSource.manager;

  describe('transition', () => {
    it('moves a pending payment once; a final payment never changes again', async () => {
      const { payment } = await given.claimed(clientId);

      const settled = await given.transitioned(payment, {
        status: 'succeeded',
        providerId: 'ch_1',
      });
      const overturned = await given.transitioned(payment, {
        status: 'failed',
        providerId: 'ch_2',
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
        await given.transitioned(payment, { status: 'succeeded', providerId: 'ch_9' }),
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
      await rows().postponeUnderLease(manager(), PAYMENTS, notYetDue.lease, notYetDue.payment, { delayMs: 60_000, countAttempt: true });
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

      const found = await rows().findDueForReconciliation(manager(), PAYMENTS, 0, 10);

      // Each named by its client too: the work on it runs on that client's shard.
      expect(found).toEqual([inReview.payment, due[1].payment, due[0].payment].map(({ id }) => ({ clientId, id })));
      const ids = found.map(({ id }) => id);
      expect(ids).not.toContain(leased.payment.id);
      expect(ids).not.toContain(final.payment.id);
      expect(await rows().findDueForReconciliation(manager(), PAYMENTS, 0, 1)).toEqual([{ clientId, id: inReview.payment.id }]);
      expect(await rows().findDueForReconciliation(manager(), PAYMENTS, 3_600_000, 10)).toEqual([]);
    });

    it('passes over the payments a sweep has already queued', async () => {
      const due = await Promise.all([1, 2, 3].map(() => given.claimed(clientId)));
      for (const { lease } of due) await given.expireLease(lease);

      const found = await rows().findDueForReconciliation(manager(), PAYMENTS, 0, 10, [due[0].payment.id, due[2].payment.id]);

      expect(found).toEqual([{ clientId, id: due[1].payment.id }]);
    });
  });

  describe('postponeUnderLease', () => {
    it('counts the attempt unless told not to and releases the lease, under the lease only', async () => {
      const { lease, payment } = await given.claimed(clientId);
      const stranger = { ...lease, token: randomUUID() };

      expect(await rows().postponeUnderLease(manager(), PAYMENTS, stranger, payment, { delayMs: 5_000, countAttempt: true })).toBe(false);
      expect(await given.paymentById(payment.id)).toEqual(payment);
      expect(await rows().postponeUnderLease(manager(), PAYMENTS, lease, payment, { delayMs: 5_000, countAttempt: true })).toBe(true);
      expect(await given.keys.find(manager(), clientId, lease.key)).toMatchObject({ leaseRemainingSeconds: 0, response: undefined });
      // Released: the same token holds nothing any more.
      expect(await rows().postponeUnderLease(manager(), PAYMENTS, lease, payment, { delayMs: 5_000, countAttempt: true })).toBe(false);
      const again = { ...lease, token: randomUUID() };
      await given.keys.takeOverLease(manager(), again, PAYMENTS, payment.id, LEASE_MS);
      expect(await rows().postponeUnderLease(manager(), PAYMENTS, again, payment, { delayMs: 5_000, countAttempt: false })).toBe(true);

      const rescheduled = await given.paymentById(payment.id);
      expect(rescheduled?.reconcileAttempts).toBe(1);
      const [{ ahead_ms: aheadMs }]: { ahead_ms: number }[] = await db.dataSource.query(
        `SELECT extract(epoch FROM next_reconcile_at - now()) * 1000 AS ahead_ms FROM payments WHERE id = $1`,
        [payment.id],
      );
      expect(Number(aheadMs)).toBeGreaterThan(4_000);
      expect(Number(aheadMs)).toBeLessThanOrEqual(5_000);
    });
  });

  it("schedules 'never': the payment is not due again", async () => {
    const { lease, payment } = await given.claimed(clientId);
    await given.expireLease(lease);

    await rows().postponeUnderLease(manager(), PAYMENTS, lease, payment, { delayMs: 'never', countAttempt: false });

    const [{ never }]: { never: boolean }[] = await db.dataSource.query(
      `SELECT next_reconcile_at = 'infinity' AS never FROM payments WHERE id = $1`,
      [payment.id],
    );
    expect(never).toBe(true);
    expect(await rows().findDueForReconciliation(manager(), PAYMENTS, 0, 10)).toEqual([]);
  });

  describe('recordOutcomeUnderLease, the decision in one statement', () => {
    const succeeded = { status: 'succeeded', providerId: 'ch_1' } as const;
    const review = { status: 'requires_review', failureCode: 'x', failureMessage: 'x' } as const;
    const config = loadConfig({});

    /** The statement, sent by a manager that counts what it sends. */
    async function decide(lease: Lease, payment: Payment, outcome: FinalOutcome) {
      const sent: string[] = [];
      const counting = new Proxy(manager(), {
        get(target, property, receiver) {
          if (property !== 'query') return Reflect.get(target, property, receiver) as unknown;
          return (text: string, params?: unknown[]) => (sent.push(text), target.query(text, params));
        },
      }) as EntityManager;
      const decided = await rows().recordOutcomeUnderLease(counting, PAYMENTS, lease, payment, decisionOf(PAYMENTS, payment, outcome, config));
      return { decided, statements: sent.length };
    }

    /** Everything a decision may write about a payment: its row, its key, its events and their deliveries. */
    async function writtenFor(payment: Payment, lease: Lease) {
      const [outbox]: { events: number; deliveries: number }[] = await db.dataSource.query(
        `SELECT (SELECT count(*)::int FROM events WHERE payment_id = $1) AS events,
                (SELECT count(*)::int FROM webhook_deliveries d JOIN events e ON e.id = d.event_id WHERE e.payment_id = $1) AS deliveries`,
        [payment.id],
      );
      const [key]: unknown[] = await db.dataSource.query(`SELECT * FROM idempotency_keys WHERE client_id = $1 AND key = $2`, [
        lease.clientId,
        lease.key,
      ]);
      return { payment: await given.paymentById(payment.id), key, ...outbox };
    }

    it('moves the payment, stores the response on its key and announces it, in one statement', async () => {
      const hooked = await given.clientWithWebhook();
      const { lease, payment } = await given.claimed(hooked);

      const { decided, statements } = await decide(lease, payment, succeeded);

      expect(statements).toBe(1);
      const row = (await given.paymentById(payment.id))!;
      expect(row).toMatchObject({ status: 'succeeded', providerChargeId: 'ch_1' });
      expect(decided).toEqual({
        kind: 'recorded',
        row,
        response: finalResponseFor(row),
        expiresInMs: config.idempotency.keyTtlHours * 3_600_000,
      });
      expect(await given.keys.find(manager(), hooked, lease.key)).toMatchObject({
        response: finalResponseFor(row),
        leaseRemainingSeconds: 0,
        expired: false,
      });
      expect(await writtenFor(payment, lease)).toMatchObject({ events: 1, deliveries: 1 });
    });

    it.each([
      ['succeeded', succeeded],
      ['failed', { status: 'failed', providerId: 'ch_2', failureCode: 'card_declined', failureMessage: 'No "way" \\ é' }],
    ] as const)('stores the very bytes the moved row renders to (%s), whatever the client wrote', async (_name, outcome) => {
      const lease: Lease = { clientId, key: randomUUID(), token: randomUUID() };
      const id = newPaymentId();
      const newRow = {
        id,
        clientId,
        amount: 4_321,
        currency: 'EUR',
        paymentMethod: 'pm_card_ok',
        orderId: null,
        description: 'quote " backslash \\ newline \n tab \t bell \u0007 é 😀 \u2028 </script>',
        metadata: { zeta: 'last', '10': 'ten', alpha: '"quoted"', '2': 'two', 'a long key': '\u0001' },
        providerKey: providerKeyFor(id),
      };
      const payment = (await given.payments.insertPendingUnderClaim(manager(), newRow, {
        lease,
        fingerprint: FINGERPRINT,
        leaseMs: LEASE_MS,
        orExpired: true,
      }))!;

      const { decided } = await decide(lease, payment, outcome);

      const row = (await given.paymentById(payment.id))!;
      const expected = finalResponseFor(row);
      expect(decided.kind === 'recorded' && decided.response).toEqual(expected);
      expect((await given.keys.find(manager(), clientId, lease.key))?.response?.body).toBe(expected.body);
    });

    it('sends a payment to review: no answer on the key, its lease released, the re-check scheduled', async () => {
      const { lease, payment } = await given.claimed(clientId);

      const { decided, statements } = await decide(lease, payment, review);

      expect(statements).toBe(1);
      expect(decided).toEqual({ kind: 'recorded', row: await given.paymentById(payment.id) });
      expect(await given.keys.find(manager(), clientId, lease.key)).toMatchObject({
        response: undefined,
        leaseRemainingSeconds: 0,
        expiresInMs: null,
      });
      const [{ ahead_ms: aheadMs }]: { ahead_ms: number }[] = await db.dataSource.query(
        `SELECT extract(epoch FROM next_reconcile_at - now()) * 1000 AS ahead_ms FROM payments WHERE id = $1`,
        [payment.id],
      );
      expect(Number(aheadMs)).toBeGreaterThan(config.reconcile.reviewRecheckIntervalMs - 10_000);
    });

    it('holds for a lease that expired with nobody taking it over', async () => {
      const { lease, payment } = await given.claimed(clientId);
      await given.expireLease(lease);

      expect((await decide(lease, payment, succeeded)).decided.kind).toBe('recorded');
    });

    it('writes nothing for a holder whose lease was taken over, and says so', async () => {
      const hooked = await given.clientWithWebhook();
      const { lease, payment } = await given.claimed(hooked);
      await given.expireLease(lease);
      const taker = { ...lease, token: randomUUID() };
      expect(await given.keys.takeOverLease(manager(), taker, PAYMENTS, payment.id, LEASE_MS)).toBe(true);
      const before = await writtenFor(payment, lease);

      const { decided, statements } = await decide(lease, payment, succeeded);

      expect(decided).toEqual({ kind: 'lease_lost' });
      expect(statements).toBe(1);
      expect(await writtenFor(payment, lease)).toEqual(before);
      expect(before).toMatchObject({ payment, events: 0, deliveries: 0 });
    });

    it('writes nothing, under a lease that holds, for a payment that cannot move so', async () => {
      const hooked = await given.clientWithWebhook();
      // In review, and taken by a new holder: review to review is no move.
      const inReview = await given.claimed(hooked);
      expect((await decide(inReview.lease, inReview.payment, review)).decided.kind).toBe('recorded');
      const holder = { ...inReview.lease, token: randomUUID() };
      expect(await given.keys.takeOverLease(manager(), holder, PAYMENTS, inReview.payment.id, LEASE_MS)).toBe(true);
      // Final with its key still leased: what only a write around the ledger leaves, and nothing may overturn.
      const final = await given.claimed(hooked);
      await db.dataSource.transaction(async (tx) => {
        await tx.query(`UPDATE payments SET status = 'succeeded', provider_charge_id = 'ch_0' WHERE id = $1`, [final.payment.id]);
        await tx.query(`INSERT INTO events (id, client_id, type, payment_id, data) VALUES ($1, $2, 'payment.succeeded', $3, '{}')`, [
          'evt_01JDQ2ZC4R5S8V9W0X1Y2Z3A4D',
          hooked,
          final.payment.id,
        ]);
      });
      const cases = [
        { lease: holder, payment: (await given.paymentById(inReview.payment.id))!, outcome: review },
        {
          lease: final.lease,
          payment: (await given.paymentById(final.payment.id))!,
          outcome: { status: 'failed', providerId: 'ch_1', failureCode: 'card_declined', failureMessage: 'no' } as const,
        },
      ];

      for (const { lease, payment, outcome } of cases) {
        const before = await writtenFor(payment, lease);
        const { decided } = await decide(lease, payment, outcome);
        expect(decided).toEqual({ kind: 'not_undecided' });
        expect(await writtenFor(payment, lease)).toEqual(before);
        expect(before.key).toMatchObject({ lease_token: lease.token, response_body: null });
      }
    });
  });


  describe('reads and the provider version', () => {
    it('reads a row of its operation under its client only, and finds it from its provider key', async () => {
      const { payment } = await given.claimed(clientId);

      expect(await rows().findForClient(manager(), PAYMENTS, payment)).toEqual(payment);
      expect(await rows().findForClient(manager(), PAYMENTS, { clientId: await given.client(), id: payment.id })).toBeUndefined();
      expect(await rows().findForClient(manager(), REFUNDS, payment)).toBeUndefined();
      expect(await rows().findByProviderKey(manager(), PAYMENTS, payment.providerKey)).toEqual({ clientId, id: payment.id });
      expect(await rows().findByProviderKey(manager(), REFUNDS, payment.providerKey)).toBeUndefined();
    });

    it('moves the provider version forward only: a late or repeated version changes nothing', async () => {
      const { payment } = await given.claimed(clientId);

      expect(await rows().advanceProviderVersion(manager(), PAYMENTS, payment, 2)).toBe(true);
      expect(await rows().advanceProviderVersion(manager(), PAYMENTS, payment, 2)).toBe(false);
      expect(await rows().advanceProviderVersion(manager(), PAYMENTS, payment, 1)).toBe(false);
      expect(await rows().advanceProviderVersion(manager(), PAYMENTS, { clientId: await given.client(), id: payment.id }, 9)).toBe(
        false,
      );
      expect(await given.paymentById(payment.id)).toMatchObject({ providerVersion: 2 });
    });
  });

  describe('listInReview', () => {
    it('lists the rows in review, longest waiting first, with their next re-check (null once re-checks ended)', async () => {
      const review = { status: 'requires_review', failureCode: 'x', failureMessage: 'x' } as const;
      const first = await given.claimed(clientId);
      await given.transitioned(first.payment, review);
      const second = await given.claimed(clientId);
      await given.transitioned(second.payment, review);
      const ended = (await given.keys.takeOverLeaseFor(manager(), PAYMENTS, second.payment, randomUUID(), LEASE_MS))!;
      expect(await rows().postponeUnderLease(manager(), PAYMENTS, ended, second.payment, { delayMs: 'never', countAttempt: false })).toBe(
        true,
      );
      await given.claimed(clientId);
      const other = await given.client();
      const othersPayment = (await given.claimed(other)).payment;
      await given.transitioned(othersPayment, review);

      const listed = await rows().listInReview(manager(), PAYMENTS, { clientId, limit: 10 });

      expect(listed.map(({ id }) => id)).toEqual([first.payment.id, second.payment.id]);
      expect(listed[0]).toMatchObject({ status: 'requires_review', nextRecheckAt: expect.any(Date) });
      expect(listed[1].nextRecheckAt).toBeNull();
      expect((await rows().listInReview(manager(), PAYMENTS, { limit: 10 })).map(({ id }) => id).sort()).toEqual(
        [first.payment.id, second.payment.id, othersPayment.id].sort(),
      );
      expect(await rows().listInReview(manager(), PAYMENTS, { clientId, limit: 1 })).toHaveLength(1);
      expect(await rows().listInReview(manager(), REFUNDS, { clientId, limit: 10 })).toEqual([]);
    });
  });

  describe('a refund: the same statements, and what its move writes on its payment', () => {
    const config = loadConfig({});

    /** A succeeded payment of 500 and a pending refund of `amount` of it, reserved. */
    async function refunding(amount: number) {
      const { payment } = await given.succeeded(clientId);
      const { lease, refund } = await given.claimedRefund(payment, amount);
      return { payment: (await given.paymentById(payment.id))!, lease, refund };
    }

    async function eventsOf(refundId: string) {
      return db.dataSource.query<{ type: string; payment_id: string | null }[]>(
        `SELECT type, payment_id FROM events WHERE refund_id = $1 ORDER BY type`,
        [refundId],
      );
    }

    it('reserves the refund’s amount at its claim, and keeps it reserved and refunded once it succeeds', async () => {
      const { payment, lease, refund } = await refunding(200);
      expect(payment).toMatchObject({ amountReserved: 200, amountRefunded: 0 });

      const decided = await given.decidedRefund(lease, refund, { status: 'succeeded', providerId: 'rf_1' });

      const row = (await given.refundById(refund.id))!;
      expect(row).toMatchObject({ status: 'succeeded', providerRefundId: 'rf_1', failureCode: null });
      expect(decided).toEqual({
        kind: 'recorded',
        row,
        response: finalRefundResponseFor(row),
        expiresInMs: config.idempotency.keyTtlHours * 3_600_000,
      });
      const after = (await given.paymentById(payment.id))!;
      expect(after).toMatchObject({ status: 'succeeded', amountReserved: 200, amountRefunded: 200 });
      expect(after.updatedAt.getTime()).toBeGreaterThan(payment.updatedAt.getTime());
      expect(await eventsOf(refund.id)).toEqual([{ type: 'refund.succeeded', payment_id: null }]);
      expect(await given.keys.find(manager(), clientId, lease.key)).toMatchObject({
        resourceId: refund.id,
        response: finalRefundResponseFor(row),
        leaseRemainingSeconds: 0,
      });
    });

    it('gives a failed refund’s amount back to what is left to refund', async () => {
      const { payment, lease, refund } = await refunding(200);
      const failed = { status: 'failed', providerId: 'rf_1', failureCode: 'refund_declined', failureMessage: 'no' } as const;

      const decided = await given.decidedRefund(lease, refund, failed);

      expect(decided).toMatchObject({ kind: 'recorded', row: { status: 'failed' }, response: { status: 402 } });
      expect(await given.paymentById(payment.id)).toMatchObject({ amountReserved: 0, amountRefunded: 0, updatedAt: payment.updatedAt });
      expect(await eventsOf(refund.id)).toEqual([{ type: 'refund.failed', payment_id: null }]);
    });

    it('changes neither sum while the refund is in review, nor when its lease was lost', async () => {
      const { payment, lease, refund } = await refunding(200);
      const stranger = { ...lease, token: randomUUID() };

      expect(await given.decidedRefund(stranger, refund, { status: 'succeeded', providerId: 'rf_1' })).toEqual({ kind: 'lease_lost' });
      const review = await given.decidedRefund(lease, refund, { status: 'requires_review', failureCode: 'x', failureMessage: 'x' });

      expect(review).toEqual({ kind: 'recorded', row: await given.refundById(refund.id) });
      expect(await given.paymentById(payment.id)).toMatchObject({ amountReserved: 200, amountRefunded: 0, updatedAt: payment.updatedAt });
      expect(await eventsOf(refund.id)).toEqual([{ type: 'refund.requires_review', payment_id: null }]);
    });

    it('finds refunds due for reconciliation on their own table, and postpones them under their lease', async () => {
      const { lease, refund } = await refunding(200);
      await given.expireLease(lease);

      expect(await rows().findDueForReconciliation(manager(), REFUNDS, 0, 10)).toEqual([{ clientId, id: refund.id }]);
      expect(await rows().findDueForReconciliation(manager(), PAYMENTS, 0, 10)).toEqual([]);
      expect(await rows().postponeUnderLease(manager(), REFUNDS, lease, refund, { delayMs: 60_000, countAttempt: true })).toBe(true);

      expect(await rows().findDueForReconciliation(manager(), REFUNDS, 0, 10)).toEqual([]);
      expect(await given.refundById(refund.id)).toMatchObject({ status: 'pending', reconcileAttempts: 1 });
    });
  });
});
