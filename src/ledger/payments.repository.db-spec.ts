import { randomUUID } from 'node:crypto';
import { type EntityManager, QueryFailedError } from 'typeorm';
import { FINGERPRINT, LEASE_MS, LedgerFixtures, useLedgerFixtures } from '../../test/support/ledger-fixtures';
import { loadConfig } from '../config/app-config';
import { isUniqueViolation } from '../database/sql';
import type { Lease } from './lease';
import { newPaymentId, providerKeyFor } from './payment-id';
import { decisionOf } from './ledger.service';
import { type FinalOutcome, finalResponseFor } from './payment-outcome';
import { ACTIVE_ORDER_INDEX, type Payment } from './payments.table';

describe('PaymentsRepository on Postgres', () => {
  const db = useLedgerFixtures();
  let given: LedgerFixtures;
  let clientId: string;

  beforeEach(() => {
    ({ given, clientId } = db);
  });

  const payments = () => given.payments;
  const manager = () => db.dataSource.manager;

  describe('the limits the API states, backed by the schema in code points', () => {
    const set = (paymentId: string, assignment: string) =>
      db.dataSource.query(`UPDATE payments SET ${assignment} WHERE id = $1`, [paymentId]);

    it.each([
      ['payments_payment_method_check', `payment_method = repeat(U&'\\2764\\FE0F', 128)`],
      ['payments_description_check', `description = repeat('x', 501)`],
      ['payments_order_id_check', `order_id = repeat(U&'\\2764\\FE0F', 33)`],
      ['payments_metadata_check', `metadata = jsonb_build_object(repeat('k', 41), 'v')`],
      ['payments_metadata_check', `metadata = jsonb_build_object('k', repeat('v', 501))`],
      ['payments_metadata_check', `metadata = '{"k": 1}'`],
      ['payments_metadata_check', `metadata = '["v"]'`],
      ['payments_metadata_check', `metadata = (SELECT jsonb_object_agg('k' || i, 'v') FROM generate_series(1, 21) i)`],
      ['payments_provider_charge_id_check', `provider_charge_id = ''`],
      ['payments_failure_code_check', `failure_code = repeat('x', 101)`],
    ])('%s refuses %s', async (constraint, assignment) => {
      const { payment } = await given.claimed(clientId);

      const error: unknown = await set(payment.id, assignment).catch((thrown: unknown) => thrown);

      expect(error).toBeInstanceOf(QueryFailedError);
      expect((error as QueryFailedError & { driverError: { constraint?: string } }).driverError.constraint).toBe(constraint);
    });

    it.each([['a non-ASCII key', 'clé'], ['a blank key', '   '], ['a key of 256 characters', 'k'.repeat(256)]])(
      'idempotency_keys_key_check refuses %s',
      async (_case, key) => {
        const { lease } = await given.claimed(clientId);

        const error: unknown = await db.dataSource
          .query(`UPDATE idempotency_keys SET key = $1 WHERE client_id = $2 AND key = $3`, [key, clientId, lease.key])
          .catch((thrown: unknown) => thrown);

        expect((error as QueryFailedError & { driverError: { constraint?: string; code?: string } }).driverError).toMatchObject(
          key.length > 255 ? { code: '22001' } : { constraint: 'idempotency_keys_key_check' },
        );
      },
    );

    it('takes every field at its limit', async () => {
      const { payment } = await given.claimed(clientId);

      await set(
        payment.id,
        `payment_method = repeat(U&'\\+01F600', 255), description = repeat(U&'\\2764\\FE0F', 250),
         order_id = repeat(U&'\\2764\\FE0F', 32),
         metadata = (SELECT jsonb_object_agg(repeat(U&'\\+01F600', 39) || i, repeat('v', 500)) FROM generate_series(1, 9) i),
         provider_charge_id = repeat('c', 255), failure_code = repeat('f', 100)`,
      );

      expect(await given.paymentById(payment.id)).toMatchObject({ orderId: '\u2764\ufe0f'.repeat(32) });
    });
  });

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
      await payments().postponeUnderLease(manager(), notYetDue.lease, notYetDue.payment, { delayMs: 60_000, countAttempt: true });
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

  describe('postponeUnderLease', () => {
    it('counts the attempt unless told not to and releases the lease, under the lease only', async () => {
      const { lease, payment } = await given.claimed(clientId);
      const stranger = { ...lease, token: randomUUID() };

      expect(await payments().postponeUnderLease(manager(), stranger, payment, { delayMs: 5_000, countAttempt: true })).toBe(false);
      expect(await given.paymentById(payment.id)).toEqual(payment);
      expect(await payments().postponeUnderLease(manager(), lease, payment, { delayMs: 5_000, countAttempt: true })).toBe(true);
      expect(await given.keys.find(manager(), clientId, lease.key)).toMatchObject({ leaseRemainingSeconds: 0, response: undefined });
      // Released: the same token holds nothing any more.
      expect(await payments().postponeUnderLease(manager(), lease, payment, { delayMs: 5_000, countAttempt: true })).toBe(false);
      const again = { ...lease, token: randomUUID() };
      await given.keys.takeOverLease(manager(), again, payment.id, LEASE_MS);
      expect(await payments().postponeUnderLease(manager(), again, payment, { delayMs: 5_000, countAttempt: false })).toBe(true);

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

    await payments().postponeUnderLease(manager(), lease, payment, { delayMs: 'never', countAttempt: false });

    const [{ never }]: { never: boolean }[] = await db.dataSource.query(
      `SELECT next_reconcile_at = 'infinity' AS never FROM payments WHERE id = $1`,
      [payment.id],
    );
    expect(never).toBe(true);
    expect(await payments().findDueForReconciliation(manager(), 0, 10)).toEqual([]);
  });

  describe('recordOutcomeUnderLease, the decision in one statement', () => {
    const succeeded = { status: 'succeeded', providerChargeId: 'ch_1' } as const;
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
      const decided = await payments().recordOutcomeUnderLease(counting, lease, payment, decisionOf(payment, outcome, config));
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
        payment: row,
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
      ['failed', { status: 'failed', providerChargeId: 'ch_2', failureCode: 'card_declined', failureMessage: 'No "way" \\ é' }],
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
      const payment = (await payments().insertPendingUnderClaim(manager(), newRow, {
        lease,
        fingerprint: FINGERPRINT,
        leaseMs: LEASE_MS,
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
      expect(decided).toEqual({ kind: 'recorded', payment: await given.paymentById(payment.id) });
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
      expect(await given.keys.takeOverLease(manager(), taker, payment.id, LEASE_MS)).toBe(true);
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
      expect(await given.keys.takeOverLease(manager(), holder, inReview.payment.id, LEASE_MS)).toBe(true);
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
          outcome: { status: 'failed', providerChargeId: 'ch_1', failureCode: 'card_declined', failureMessage: 'no' } as const,
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
