import { randomUUID } from 'node:crypto';
import { LEASE_MS, LedgerFixtures, useLedgerFixtures } from '../../test/support/ledger-fixtures';
import { type Lease, heldSince } from './lease';
import type { DataSource } from 'typeorm';
import { loadConfig } from '../config/app-config';
import { Ledger } from './ledger.service';
import { PAYMENTS, REFUNDS } from './operations';

describe('Ledger on Postgres', () => {
  const db = useLedgerFixtures();
  let given: LedgerFixtures;
  let ledger: Ledger;
  let clientId: string;

  beforeEach(() => {
    ({ given, clientId } = db);
    ledger = new Ledger(db.dataSource, given.keys, given.rows, loadConfig({}));
  });

  const keyOf = (lease: Lease) => given.keys.find(db.dataSource.manager, lease.clientId, lease.key);

  /** Another request or worker takes the lease over after ours expired. */
  async function takenOver(lease: Lease): Promise<Lease> {
    await given.expireLease(lease);
    const taker = { ...lease, token: randomUUID() };
    const { resourceId } = (await keyOf(lease))!;
    if (!(await given.keys.takeOverLease(db.dataSource.manager, taker, PAYMENTS, resourceId, LEASE_MS))) {
      throw new Error('no takeover');
    }
    return taker;
  }

  it('records the outcome and the response to replay in one commit', async () => {
    const { lease, payment } = await given.claimed(clientId);

    const recorded = await ledger.recordOutcome(PAYMENTS, lease, payment, { status: 'succeeded', providerId: 'ch_1' });

    const response = recorded?.response;
    expect(response?.status).toBe(201);
    expect(JSON.parse(response!.body)).toMatchObject({ id: payment.id, status: 'succeeded', provider_charge_id: 'ch_1' });
    expect(await given.paymentById(payment.id)).toMatchObject({ status: 'succeeded' });
    expect(await keyOf(lease)).toMatchObject({ response, leaseRemainingSeconds: 0 });
  });

  it('records several outcomes in one commit, and nothing for a payment whose lease was lost', async () => {
    const kept = await given.claimed(clientId);
    const lost = await given.claimed(clientId);
    const taker = await takenOver(lost.lease);

    const recorded = await ledger.recordOutcomes(PAYMENTS, [
      { lease: kept.lease, row: kept.payment, outcome: { status: 'succeeded', providerId: 'ch_1' } },
      { lease: lost.lease, row: lost.payment, outcome: { status: 'succeeded', providerId: 'ch_2' } },
    ]);

    expect(recorded).toEqual([
      { status: 'fulfilled', value: expect.objectContaining({ response: expect.objectContaining({ status: 201 }) }) },
      { status: 'fulfilled', value: undefined },
    ]);
    const [first] = recorded;
    expect(await given.paymentById(kept.payment.id)).toMatchObject({ status: 'succeeded', providerChargeId: 'ch_1' });
    expect(await keyOf(kept.lease)).toMatchObject({
      response: first.status === 'fulfilled' ? first.value?.response : 'missing',
      leaseRemainingSeconds: 0,
    });
    expect(await given.paymentById(lost.payment.id)).toMatchObject({ status: 'pending' });
    expect(await keyOf(taker)).toMatchObject({ response: undefined });
  });

  it('lets a payment whose outcome cannot be written fail alone: the others of the batch commit', async () => {
    const [before, poisoned, after] = [await given.claimed(clientId), await given.claimed(clientId), await given.claimed(clientId)];
    const declined = { status: 'failed', providerId: 'ch_2', failureCode: 'do_not_honor\u0000', failureMessage: 'x' } as const;

    const recorded = await ledger.recordOutcomes(PAYMENTS, [
      { lease: before.lease, row: before.payment, outcome: { status: 'succeeded', providerId: 'ch_1' } },
      { lease: poisoned.lease, row: poisoned.payment, outcome: declined },
      { lease: after.lease, row: after.payment, outcome: { status: 'succeeded', providerId: 'ch_3' } },
    ]);

    expect(recorded.map((settled) => settled.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(await given.paymentById(before.payment.id)).toMatchObject({ status: 'succeeded', providerChargeId: 'ch_1' });
    expect(await given.paymentById(after.payment.id)).toMatchObject({ status: 'succeeded', providerChargeId: 'ch_3' });
    expect(await given.paymentById(poisoned.payment.id)).toMatchObject({ status: 'pending', providerChargeId: null });
    // Still under the caller's lease, which can postpone it.
    expect(await ledger.postpone(PAYMENTS, poisoned.lease, poisoned.payment.id, { delayMs: 1_000, countAttempt: true })).toBe(true);
    expect(await given.paymentById(poisoned.payment.id)).toMatchObject({ status: 'pending', reconcileAttempts: 1 });
  });

  it('sends a payment to review with no answer on its key, the lease released and the re-check scheduled', async () => {
    const { lease, payment } = await given.claimed(clientId);

    const recorded = await ledger.recordOutcome(PAYMENTS, lease, payment, {
      status: 'requires_review',
      failureCode: 'reconciliation_exhausted',
      failureMessage: 'No final answer.',
    });

    expect(recorded).toEqual({ row: expect.objectContaining({ status: 'requires_review' }) });
    expect(await keyOf(lease)).toMatchObject({ response: undefined, leaseRemainingSeconds: 0, expired: false });
    const [{ ahead_ms: aheadMs }]: { ahead_ms: string }[] = await db.dataSource.query(
      `SELECT extract(epoch FROM next_reconcile_at - now()) * 1000 AS ahead_ms FROM payments WHERE id = $1`,
      [payment.id],
    );
    expect(Number(aheadMs)).toBeGreaterThan(3_500_000);
  });

  it('moves a payment in review once, to a final status, storing the final response', async () => {
    const { lease, payment } = await given.claimed(clientId);
    await ledger.recordOutcome(PAYMENTS, lease, payment, { status: 'requires_review', failureCode: 'x', failureMessage: 'x' });
    const resolver = { ...lease, token: randomUUID() };
    await given.keys.takeOverLease(db.dataSource.manager, resolver, PAYMENTS, payment.id, LEASE_MS);

    const resolved = await ledger.recordOutcome(PAYMENTS, resolver, (await given.paymentById(payment.id))!, {
      status: 'failed',
      providerId: null,
      failureCode: 'review_resolved_failed',
      failureMessage: 'The payment failed after review.',
      resolution: { by: 'ops', reason: 'the provider never received it' },
    });

    expect(resolved?.response?.status).toBe(402);
    expect(await given.paymentById(payment.id)).toMatchObject({
      status: 'failed',
      providerChargeId: null,
      resolvedBy: 'ops',
      resolutionReason: 'the provider never received it',
    });
    expect((await keyOf(lease))?.response).toEqual(resolved?.response);
  });

  it('writes nothing for a holder whose lease was taken over', async () => {
    const { lease, payment } = await given.claimed(clientId);
    await takenOver(lease);

    const recorded = await ledger.recordOutcome(PAYMENTS, lease, payment, { status: 'succeeded', providerId: 'ch_1' });
    const postponed = await ledger.postpone(PAYMENTS, lease, payment.id, { delayMs: 1_000, countAttempt: true });

    expect(recorded).toBeUndefined();
    expect(postponed).toBe(false);
    expect(await given.paymentById(payment.id)).toMatchObject({ status: 'pending', reconcileAttempts: 0 });
    expect((await keyOf(lease))?.response).toBeUndefined();
  });

  it('postpones: schedules the next look and releases the lease in one commit', async () => {
    const { lease, payment } = await given.claimed(clientId);

    expect(await ledger.postpone(PAYMENTS, lease, payment.id, { delayMs: 1_000, countAttempt: true })).toBe(true);

    expect(await given.paymentById(payment.id)).toMatchObject({ status: 'pending', reconcileAttempts: 1 });
    expect(await keyOf(lease)).toMatchObject({ leaseRemainingSeconds: 0, response: undefined });
    const taker = { ...lease, token: randomUUID() };
    expect(await given.keys.takeOverLease(db.dataSource.manager, taker, PAYMENTS, payment.id, LEASE_MS)).toBe(true);
  });

  describe('holdForCall, the fence of the provider call', () => {
    it('costs no statement while the lease is known to outlast the call', async () => {
      const { lease } = await given.claimed(clientId);
      await given.expireLease(lease);
      const held = heldSince(lease, performance.now(), LEASE_MS);

      expect(await ledger.holdForCall(held, 1_000)).toBe(held);
      // Not renewed: Postgres still sees the lease as expired.
      expect((await keyOf(lease))?.leaseRemainingSeconds).toBe(0);
    });

    it('renews a lease that might expire during the call, if it still holds', async () => {
      const { lease } = await given.claimed(clientId);
      await given.expireLease(lease);
      const stale = heldSince(lease, performance.now() - LEASE_MS, LEASE_MS);

      const renewed = await ledger.holdForCall(stale, 1_000);

      expect(renewed?.heldUntil).toBeGreaterThan(performance.now() + 1_000);
      expect((await keyOf(lease))?.leaseRemainingSeconds).toBe(LEASE_MS / 1000);
    });

    it('refuses the call to a holder whose lease was taken over', async () => {
      const { lease } = await given.claimed(clientId);
      const stalled = heldSince(lease, performance.now() - LEASE_MS, LEASE_MS);
      await takenOver(lease);

      expect(await ledger.holdForCall(stalled, 1_000)).toBeUndefined();
    });
  });

  it('records an outcome in one statement: no transaction, one round trip', async () => {
    const { lease, payment } = await given.claimed(clientId);
    const sent: string[] = [];
    const manager = new Proxy(db.dataSource.manager, {
      get(target, property, receiver) {
        if (property !== 'query') return Reflect.get(target, property, receiver) as unknown;
        return (text: string, params?: unknown[]) => (sent.push(text), target.query(text, params));
      },
    });
    const counted = { manager, transaction: () => Promise.reject(new Error('no transaction')) } as unknown as DataSource;
    const counting = new Ledger(counted, given.keys, given.rows, loadConfig({}));

    const recorded = await counting.recordOutcome(PAYMENTS, lease, payment, { status: 'succeeded', providerId: 'ch_1' });

    expect(sent).toHaveLength(1);
    expect(recorded?.response?.status).toBe(201);
    // The key's retention as Postgres counted it, for the answer cache: the TTL, from the statement's now().
    expect(recorded?.expiresInMs).toBe(24 * 3_600_000);
    expect(await keyOf(lease)).toMatchObject({ response: recorded?.response });
  });

  it('throws, having written nothing, when the lease holds but the payment cannot move so', async () => {
    const { lease, payment } = await given.claimed(clientId);
    const review = { status: 'requires_review', failureCode: 'x', failureMessage: 'x' } as const;
    await ledger.recordOutcome(PAYMENTS, lease, payment, review);
    const again = { ...lease, token: randomUUID() };
    await given.keys.takeOverLease(db.dataSource.manager, again, PAYMENTS, payment.id, LEASE_MS);
    const inReview = (await given.paymentById(payment.id))!;

    await expect(ledger.recordOutcome(PAYMENTS, again, inReview, review)).rejects.toThrow(/already final/);

    expect(await given.paymentById(payment.id)).toEqual(inReview);
    expect(await keyOf(again)).toMatchObject({ response: undefined, leaseRemainingSeconds: LEASE_MS / 1000 });
  });

  it('finds a row as it is now, of the operation asked and under its client only', async () => {
    const { payment } = await given.succeeded(clientId);

    expect(await ledger.find(PAYMENTS, payment)).toMatchObject({ id: payment.id, status: 'succeeded' });
    expect(await ledger.find(REFUNDS, payment)).toBeUndefined();
    expect(await ledger.find(PAYMENTS, { clientId: await given.client(), id: payment.id })).toBeUndefined();
  });

  it('hands out the refund of an unfinished key, and refuses it once it is final', async () => {
    const { payment } = await given.succeeded(clientId);
    const { lease, refund } = await given.claimedRefund(payment, 100);

    expect(await ledger.undecided(REFUNDS, refund)).toEqual(refund);
    await ledger.recordOutcome(REFUNDS, lease, refund, { status: 'succeeded', providerId: 'rf_1' });
    await expect(ledger.undecided(REFUNDS, refund)).rejects.toThrow(`refund ${refund.id} has an unfinished key but is already final`);
  });

  it('refuses to hand out the payment of an unfinished key once it is final', async () => {
    const { payment } = await given.succeeded(clientId);

    await expect(ledger.undecided(PAYMENTS, payment)).rejects.toThrow(/already final/);
  });
});
