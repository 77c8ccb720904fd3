import { randomUUID } from 'node:crypto';
import { eventually } from '../../test/support/eventually';
import { FINGERPRINT, LEASE_MS, LedgerFixtures, useLedgerFixtures } from '../../test/support/ledger-fixtures';
import { newPaymentId } from './payment-id';
import type { Lease } from './lease';
import { PAYMENTS, REFUNDS } from './operations';

describe('IdempotencyRepository on Postgres', () => {
  const db = useLedgerFixtures();
  let given: LedgerFixtures;
  let clientId: string;

  beforeEach(() => {
    ({ given, clientId } = db);
  });

  const keys = () => given.keys;
  const manager = () => db.dataSource.manager;
  const otherLease = (lease: Lease): Lease => ({ ...lease, token: randomUUID() });

  /** A second claim of the key, as a new request for a new payment makes it: the claim and its payment in one statement. */
  async function claimAgain(lease: Lease): Promise<boolean> {
    return (await given.claimAs(otherLease(lease), 'e'.repeat(64))) !== undefined;
  }

  describe('claim', () => {
    it('claims a new key with a live lease, no response and the retention ahead', async () => {
      const { lease, payment } = await given.claimed(clientId);

      const state = await keys().find(manager(), clientId, lease.key);

      expect(state).toEqual({
        fingerprint: FINGERPRINT,
        resourceId: payment.id,
        response: undefined,
        leaseRemainingSeconds: LEASE_MS / 1000,
        expired: false,
        expiresInMs: null,
      });
    });

    it('refuses a key that is held, finished but not expired, or unfinished however old', async () => {
      const held = await given.claimed(clientId);
      const finished = await given.succeeded(clientId);
      const abandoned = await given.claimed(clientId);
      await given.expireLease(abandoned.lease);
      await given.ageClaim(abandoned.lease);

      expect(await claimAgain(held.lease)).toBe(false);
      expect(await claimAgain(finished.lease)).toBe(false);
      expect(await claimAgain(abandoned.lease)).toBe(false);
      expect((await keys().find(manager(), clientId, abandoned.lease.key))?.resourceId).toBe(abandoned.payment.id);
    });

    it('counts the retention from the stored answer, not from the claim', async () => {
      const { lease, payment } = await given.claimed(clientId);
      await given.ageClaim(lease);
      const succeeded = { status: 'succeeded', providerId: 'ch_1' } as const;
      await given.decided(lease, payment, succeeded, { IDEMPOTENCY_KEY_TTL_HOURS: '0.5' });

      const [row]: { retention_s: number }[] = await db.dataSource.query(
        `SELECT extract(epoch FROM expires_at - completed_at) AS retention_s FROM idempotency_keys WHERE key = $1`,
        [lease.key],
      );
      expect(Number(row.retention_s)).toBe(1_800);
      const state = await keys().find(manager(), clientId, lease.key);
      expect(state?.expired).toBe(false);
      // What the answer cache keeps the answer for: the retention left by Postgres' clock.
      expect(state?.expiresInMs).toBeGreaterThan(1_790_000);
      expect(state?.expiresInMs).toBeLessThanOrEqual(1_800_000);
      expect(await claimAgain(lease)).toBe(false);
    });

    it('takes over an expired key whose payment is final, as a new request: new payment, no stored response', async () => {
      const { lease, payment } = await given.succeeded(clientId);
      await given.expireRetention(lease);

      expect(await claimAgain(lease)).toBe(true);

      const state = await keys().find(manager(), clientId, lease.key);
      expect(state?.resourceId).not.toBe(payment.id);
      expect(state).toMatchObject({ fingerprint: 'e'.repeat(64), response: undefined, expired: false });
      expect(state?.leaseRemainingSeconds).toBeGreaterThan(0);
    });

    it('claims only a key nobody has when told so: an expired key is neither taken over nor waited for', async () => {
      const { lease } = await given.succeeded(clientId);
      await given.expireRetention(lease);

      await db.dataSource.transaction(async (tx) => {
        await tx.query('SELECT 1 FROM idempotency_keys WHERE client_id = $1 AND key = $2 FOR UPDATE', [clientId, lease.key]);
        // A claim that may take the key over locks it, so it would wait for this transaction.
        const claim = given.claimAs(otherLease(lease), 'e'.repeat(64), null, false);
        const waited = new Promise<'waited'>((resolve) => setTimeout(() => resolve('waited'), 2_000).unref());
        expect(await Promise.race([claim, waited])).toBeUndefined();
      });

      expect(await keys().find(manager(), clientId, lease.key)).toMatchObject({ fingerprint: FINGERPRINT, expired: true });
      expect(await claimAgain(lease)).toBe(true);
    });

    it('takes over an expired key of a payment for a refund, as a new request: the key names the refund only', async () => {
      const { lease, payment } = await given.succeeded(clientId);
      await given.expireRetention(lease);

      const { refund } = await given.claimedRefund(payment, 100, lease.key);

      expect(await keys().find(manager(), clientId, lease.key)).toMatchObject({ resourceId: refund.id, response: undefined });
      const [row]: { payment_id: string | null; refund_id: string | null }[] = await db.dataSource.query(
        `SELECT payment_id, refund_id FROM idempotency_keys WHERE client_id = $1 AND key = $2`,
        [clientId, lease.key],
      );
      expect(row).toEqual({ payment_id: null, refund_id: refund.id });
    });
  });

  describe('the lease', () => {
    it('is taken over only once it has expired or been released, and never on a finished key', async () => {
      const live = await given.claimed(clientId);
      const expired = await given.claimed(clientId);
      await given.expireLease(expired.lease);
      const released = await given.claimed(clientId);
      await keys().release(manager(), released.lease);
      const finished = await given.succeeded(clientId);

      const takeOver = (held: { lease: Lease; payment: { id: string } }) =>
        keys().takeOverLease(manager(), otherLease(held.lease), PAYMENTS, held.payment.id, LEASE_MS);

      expect(await takeOver(live)).toBe(false);
      expect(await takeOver(expired)).toBe(true);
      expect(await takeOver(released)).toBe(true);
      expect(await takeOver(finished)).toBe(false);
    });

    it('is taken over only for the payment the taker read the key for', async () => {
      const { lease, payment } = await given.claimed(clientId);
      await given.expireLease(lease);

      expect(await keys().takeOverLease(manager(), otherLease(lease), PAYMENTS, newPaymentId(), LEASE_MS)).toBe(false);
      // The same id, read as another operation's row, is not this key's either.
      expect(await keys().takeOverLease(manager(), otherLease(lease), REFUNDS, payment.id, LEASE_MS)).toBe(false);
    });

    it('is renewed only by its holder, and only while the key is unfinished', async () => {
      const { lease } = await given.claimed(clientId);
      await given.expireLease(lease);
      const finished = await given.succeeded(clientId);

      expect(await keys().renewLease(manager(), otherLease(lease), LEASE_MS)).toBe(false);
      expect((await keys().find(manager(), clientId, lease.key))?.leaseRemainingSeconds).toBe(0);
      expect(await keys().renewLease(manager(), lease, LEASE_MS)).toBe(true);
      expect((await keys().find(manager(), clientId, lease.key))?.leaseRemainingSeconds).toBe(LEASE_MS / 1000);
      expect(await keys().renewLease(manager(), finished.lease, LEASE_MS)).toBe(false);
    });

    it('is found from the payment by the worker, under the same conditions', async () => {
      const live = await given.claimed(clientId);
      const expired = await given.claimed(clientId);
      await given.expireLease(expired.lease);

      expect(await keys().takeOverLeaseFor(manager(), PAYMENTS, live.payment, randomUUID(), LEASE_MS)).toBeUndefined();
      expect(await keys().takeOverLeaseFor(manager(), REFUNDS, expired.payment, randomUUID(), LEASE_MS)).toBeUndefined();
      const token = randomUUID();
      expect(await keys().takeOverLeaseFor(manager(), PAYMENTS, expired.payment, token, LEASE_MS)).toEqual({
        clientId,
        key: expired.lease.key,
        token,
      });
    });

    it('takes a batch in one statement: the leases of the due payments, and those payments as they are', async () => {
      const due = await given.claimed(clientId);
      await given.expireLease(due.lease);
      const leased = await given.claimed(clientId);
      const decided = await given.succeeded(clientId);
      const postponed = await given.claimed(clientId);
      await given.expireLease(postponed.lease);
      expect(
        await given.rows.postponeUnderLease(manager(), PAYMENTS, postponed.lease, postponed.payment, { delayMs: 60_000, countAttempt: true }),
      ).toBe(true);
      const ids = [due, leased, decided, postponed].map(({ payment }) => payment.id);
      const token = randomUUID();

      const taken = await keys().takeOverDueLeases(manager(), PAYMENTS, clientId, ids, token, LEASE_MS);

      expect(taken).toEqual([{ key: due.lease.key, row: { ...due.payment, updatedAt: expect.any(Date) } }]);
      expect(await keys().lockHeldLeases(manager(), [{ clientId, key: due.lease.key, token }])).toEqual(new Set([due.lease.key]));
      expect(await keys().lockHeldLeases(manager(), [due.lease])).toEqual(new Set());
      // Taken now: a second batch with the same payments takes nothing.
      expect(await keys().takeOverDueLeases(manager(), PAYMENTS, clientId, ids, randomUUID(), LEASE_MS)).toEqual([]);
      // Another client's batch never takes this client's keys.
      expect(await keys().takeOverDueLeases(manager(), PAYMENTS, await given.client(), ids, randomUUID(), LEASE_MS)).toEqual([]);
    });

    it('does not take a key whose payment changed while the batch statement waited for it', async () => {
      const { lease, payment } = await given.claimed(clientId);
      await given.expireLease(lease);
      // The previous holder, stalled past its lease, postpones the payment
      // (still due) while the batch statement runs: it holds the key row locked.
      const holder = db.dataSource.createQueryRunner();
      await holder.connect();
      try {
        await holder.startTransaction();
        expect(await given.rows.postponeUnderLease(holder.manager, PAYMENTS, lease, payment, { delayMs: 0, countAttempt: true })).toBe(true);
        const batch = keys().takeOverDueLeases(manager(), PAYMENTS, clientId, [payment.id], randomUUID(), LEASE_MS);
        await eventually(
          async () => {
            const [{ waiting }] = (await db.dataSource.query(
              `SELECT count(*)::int AS waiting FROM pg_stat_activity
                WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'WITH seen AS%'`,
            )) as { waiting: number }[];
            return waiting === 1 ? true : undefined;
          },
          { what: 'the batch statement to wait for the key row' },
        );
        await holder.commitTransaction();

        // Taken, it would have come with the attempts as they were before the
        // commit (0, not 1): the statement read the payment before it waited.
        expect(await batch).toEqual([]);
      } finally {
        await holder.release();
      }
      expect(await given.paymentById(payment.id)).toMatchObject({ reconcileAttempts: 1 });
    });

    it('fences a batch: locks only the keys whose leases still hold', async () => {
      const kept = await given.claimed(clientId);
      const lost = await given.claimed(clientId);
      const token = randomUUID();
      for (const { lease } of [kept, lost]) {
        await given.expireLease(lease);
        const { resourceId } = (await keys().find(manager(), clientId, lease.key))!;
        await keys().takeOverLease(manager(), { ...lease, token }, PAYMENTS, resourceId, LEASE_MS);
      }
      const keptLease = { ...kept.lease, token };
      const lostLease = { ...lost.lease, token };
      await given.expireLease(lostLease);
      await keys().takeOverLease(manager(), otherLease(lostLease), PAYMENTS, lost.payment.id, LEASE_MS);

      const held = await db.dataSource.transaction((tx) => keys().lockHeldLeases(tx, [keptLease, lostLease]));

      expect([...held]).toEqual([kept.lease.key]);
      await expect(keys().lockHeldLeases(manager(), [keptLease, { ...lostLease, clientId: 'client_other' }])).rejects.toThrow(
        'leases of several clients',
      );
    });

    it('lets only its holder settle or release the key', async () => {
      const { lease, payment } = await given.claimed(clientId);
      const stranger = otherLease(lease);
      const succeeded = { status: 'succeeded', providerId: 'ch_1' } as const;

      expect(await given.decided(stranger, payment, succeeded)).toEqual({ kind: 'lease_lost' });
      await keys().release(manager(), stranger);
      expect(await keys().find(manager(), clientId, lease.key)).toMatchObject({
        response: undefined,
        leaseRemainingSeconds: LEASE_MS / 1000,
      });

      const decided = await given.decided(lease, payment, succeeded);
      expect(decided).toMatchObject({ kind: 'recorded', response: { status: 201 } });
      expect(await keys().find(manager(), clientId, lease.key)).toMatchObject({
        response: decided.kind === 'recorded' ? decided.response : 'none',
        leaseRemainingSeconds: 0,
      });
    });
  });

  describe('pruneExpired', () => {
    it("deletes one client's expired keys only, never an unfinished one however old, one batch at a time", async () => {
      const expiredFinal = await Promise.all([1, 2, 3].map(() => given.succeeded(clientId)));
      for (const { lease } of expiredFinal) await given.expireRetention(lease);
      const fresh = await given.succeeded(clientId);
      const unfinished = await given.claimed(clientId);
      await given.ageClaim(unfinished.lease);
      const otherClient = await given.client();
      const othersExpired = await given.succeeded(otherClient);
      await given.expireRetention(othersExpired.lease);
      expect(await keys().countExpired(manager(), clientId, 10)).toBe(3);
      expect(await keys().countExpired(manager(), clientId, 2)).toBe(2);

      expect(await keys().pruneExpired(manager(), clientId, 2)).toBe(2);
      expect(await keys().pruneExpired(manager(), clientId, 2)).toBe(1);
      expect(await keys().pruneExpired(manager(), clientId, 2)).toBe(0);

      const left: { key: string }[] = await db.dataSource.query(`SELECT key FROM idempotency_keys ORDER BY key`);
      expect(left.map((row) => row.key).sort()).toEqual([fresh.lease.key, unfinished.lease.key, othersExpired.lease.key].sort());
    });
  });
});
