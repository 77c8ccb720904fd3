import { eventually } from '../../test/support/eventually';
import { LedgerFixtures, useLedgerFixtures } from '../../test/support/ledger-fixtures';
import { loadConfig } from '../config/app-config';
import { isUniqueViolation } from '../database/sql';
import { Ledger } from '../ledger/ledger.service';
import { PAYMENTS, REFUNDS } from '../ledger/operations';
import { toResource } from '../ledger/payment-resource';
import { toRefundResource } from '../ledger/refund-resource';
import type { EventRecord } from '../ledger/events.table';

describe('EventsRepository and the outbox on Postgres', () => {
  const db = useLedgerFixtures();
  let given: LedgerFixtures;
  let clientId: string;
  let ledger: Ledger;

  beforeEach(() => {
    ({ given, clientId } = db);
    ledger = new Ledger(db.dataSource, given.keys, given.rows, loadConfig({}));
  });

  const eventsOf = (paymentId: string): Promise<EventRecord[]> =>
    db.dataSource.query(
      `SELECT id, type, data, client_id AS "clientId", created_at AS "createdAt" FROM events WHERE payment_id = $1 ORDER BY created_at`,
      [paymentId],
    );
  const deliveriesOf = async (eventId: string): Promise<number> =>
    (await db.dataSource.query(`SELECT count(*)::int AS n FROM webhook_deliveries WHERE event_id = $1`, [eventId]))[0].n;

  it('commits each decision with one event of its type, carrying the payment as it now is', async () => {
    const { lease, payment } = await given.claimed(clientId);

    const recorded = await ledger.recordOutcome(PAYMENTS, lease, payment, { status: 'succeeded', providerId: 'ch_1' });

    const events = await eventsOf(payment.id);
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ type: 'payment.succeeded', clientId, data: { object: toResource(recorded!.row) } });
    expect(events[0].id).toMatch(/^evt_[0-9A-HJKMNP-TV-Z]{26}$/);
    // The payment's own field order, as the API shows it: kept by the json column.
    expect(Object.keys(events[0].data.object)).toEqual(Object.keys(toResource(recorded!.row)));
  });

  it('announces a review and then its end, once each', async () => {
    const { lease, payment } = await given.claimed(clientId);
    const review = { status: 'requires_review', failureCode: 'x', failureMessage: 'x' } as const;
    await ledger.recordOutcome(PAYMENTS, lease, payment, review);
    const failed = { status: 'failed', providerId: null, failureCode: 'card_declined', failureMessage: 'no' } as const;
    await given.transitioned(payment, failed);

    expect((await eventsOf(payment.id)).map((event) => event.type)).toEqual(['payment.requires_review', 'payment.failed']);
  });

  it('refuses to commit a status change without its event, whoever writes it', async () => {
    const { payment } = await given.claimed(clientId);

    const refused = await db.dataSource
      .query(`UPDATE payments SET status = 'succeeded' WHERE id = $1`, [payment.id])
      .catch((error: unknown) => error);

    expect(refused).toMatchObject({ driverError: { constraint: 'payments_status_event_check' } });
    expect(await given.paymentById(payment.id)).toMatchObject({ status: 'pending' });
    expect(await eventsOf(payment.id)).toEqual([]);
  });

  it('announces a refund’s decision with a refund event carrying the refund, and refuses a refund’s change without one', async () => {
    const { payment } = await given.succeeded(clientId);
    const { lease, refund } = await given.claimedRefund(payment, 100);

    const recorded = await ledger.recordOutcome(REFUNDS, lease, refund, { status: 'succeeded', providerId: 'rf_1' });

    const events: unknown[] = await db.dataSource.query(
      `SELECT type, payment_id AS "paymentId", refund_id AS "refundId", data FROM events WHERE client_id = $1 AND type LIKE 'refund.%'`,
      [clientId],
    );
    expect(events).toEqual([
      { type: 'refund.succeeded', paymentId: null, refundId: refund.id, data: { object: toRefundResource(recorded!.row) } },
    ]);
    const unannounced = await given.claimedRefund(payment, 100);
    const refused = await db.dataSource
      .query(`UPDATE refunds SET status = 'failed' WHERE id = $1`, [unannounced.refund.id])
      .catch((error: unknown) => error);
    expect(refused).toMatchObject({ driverError: { constraint: 'refunds_status_event_check' } });
  });

  it('leaves neither the change nor its event when the statement fails', async () => {
    const { lease, payment } = await given.claimed(clientId);
    // An event of this status already there (as a hand-written one would be): the statement's own is refused.
    await db.dataSource.query(
      `INSERT INTO events (id, client_id, type, payment_id, data) VALUES ($1, $2, 'payment.succeeded', $3, '{}')`,
      ['evt_01JDQ2ZC4R5S8V9W0X1Y2Z3A4D', clientId, payment.id],
    );

    const refused = await ledger
      .recordOutcome(PAYMENTS, lease, payment, { status: 'succeeded', providerId: 'ch_1' })
      .catch((error: unknown) => error);

    // One status change is announced under one event id: a second event for it is refused, and the change with it.
    expect(isUniqueViolation(refused, 'events_payment_type_key')).toBe(true);
    expect(await given.paymentById(payment.id)).toMatchObject({ status: 'pending' });
    expect((await given.keys.find(db.dataSource.manager, clientId, lease.key))?.response).toBeUndefined();
    expect(await eventsOf(payment.id)).toHaveLength(1);
  });

  it('carries the very bytes the moved row renders to, updated_at included', async () => {
    const { lease, payment } = await given.claimed(clientId);

    const recorded = await ledger.recordOutcome(PAYMENTS, lease, payment, { status: 'succeeded', providerId: 'ch_1' });

    const [{ data }]: { data: string }[] = await db.dataSource.query(`SELECT data::text FROM events WHERE payment_id = $1`, [
      payment.id,
    ]);
    const row = (await given.paymentById(payment.id))!;
    expect(data).toBe(JSON.stringify({ object: toResource(row) }));
    expect(recorded?.row).toEqual(row);
  });

  it('queues a delivery with each event of a client that has a webhook endpoint, and none otherwise', async () => {
    const hooked = await given.clientWithWebhook();
    const withEndpoint = await given.succeeded(hooked);
    const without = await given.succeeded(clientId);

    const [hookedEvent] = await eventsOf(withEndpoint.payment.id);
    const [plainEvent] = await eventsOf(without.payment.id);
    expect(await deliveriesOf(hookedEvent.id)).toBe(1);
    expect(await deliveriesOf(plainEvent.id)).toBe(0);
  });

  it('lists a client’s events newest first, by type, after a cursor, and no one else’s', async () => {
    const other = await given.client();
    await given.succeeded(other);
    const first = await given.succeeded(clientId);
    const { lease, payment } = await given.claimed(clientId);
    await ledger.recordOutcome(PAYMENTS, lease, payment, { status: 'requires_review', failureCode: 'x', failureMessage: 'x' });
    const third = await given.succeeded(clientId);
    const manager = db.dataSource.manager;

    const all = await eventually(async () => {
      const listed = await given.events.listForClient(manager, clientId, { limit: 10 });
      return listed.events.length === 3 ? listed : undefined;
    }, { what: 'three events listed' });
    expect(all.events.map((event) => event.paymentId)).toEqual([third.payment.id, payment.id, first.payment.id]);
    expect(all.hasMore).toBe(false);

    const page = await given.events.listForClient(manager, clientId, { limit: 1, startingAfter: all.events[0].id });
    expect(page.events.map((event) => event.paymentId)).toEqual([payment.id]);
    expect(page.hasMore).toBe(true);

    const succeeded = await given.events.listForClient(manager, clientId, { limit: 10, type: 'payment.succeeded' });
    expect(succeeded.events.map((event) => event.paymentId)).toEqual([third.payment.id, first.payment.id]);
    expect(await given.events.findForClient(manager, other, all.events[0].id)).toBeUndefined();
  });

  it('never lets a reader catching up newest-first miss an event whose transaction committed after a later one', async () => {
    const manager = db.dataSource.manager;
    const seen: string[] = [];
    /** A merchant catching up: newest first, page after page, until an event it already has. */
    const catchUp = async (): Promise<void> => {
      let startingAfter: string | undefined;
      for (;;) {
        const page = await given.events.listForClient(manager, clientId, { limit: 1, startingAfter });
        for (const event of page.events) {
          if (seen.includes(event.id)) return;
          seen.push(event.id);
        }
        if (!page.hasMore) return;
        startingAfter = page.events[page.events.length - 1].id;
      }
    };
    const first = await given.succeeded(clientId);
    const [firstEvent] = await eventsOf(first.payment.id);
    await eventually(async () => (await catchUp(), seen.includes(firstEvent.id) || undefined), { what: 'the first event listed' });

    // The earlier transaction writes its event, the later one writes and commits, then the earlier one commits.
    const early = await given.claimed(clientId);
    const runner = db.dataSource.createQueryRunner();
    await runner.startTransaction();
    try {
      await ledger.recordOutcome(PAYMENTS, early.lease, early.payment, { status: 'succeeded', providerId: 'ch_early' }, runner.manager);
      const late = await given.succeeded(clientId);
      const [lateEvent] = await eventsOf(late.payment.id);
      await catchUp();
      // The later commit is not listed while a transaction that started before it may still add an event below it.
      expect(seen).not.toContain(lateEvent.id);
      await runner.commitTransaction();
      const [earlyEvent] = await eventsOf(early.payment.id);

      await eventually(async () => (await catchUp(), (seen.includes(earlyEvent.id) && seen.includes(lateEvent.id)) || undefined), {
        what: 'both events caught up',
      });
      expect(new Set(seen)).toEqual(new Set([firstEvent.id, earlyEvent.id, lateEvent.id]));
    } finally {
      if (runner.isTransactionActive) await runner.rollbackTransaction();
      await runner.release();
    }
  });

  describe('pruneMadeBefore', () => {
    const manager = () => db.dataSource.manager;
    const left = async (): Promise<{ events: string[]; deliveries: string[] }> => ({
      events: ((await db.dataSource.query(`SELECT payment_id FROM events`)) as { payment_id: string }[]).map((row) => row.payment_id).sort(),
      deliveries: ((await db.dataSource.query(`SELECT e.payment_id FROM webhook_deliveries d JOIN events e ON e.id = d.event_id`)) as {
        payment_id: string;
      }[])
        .map((row) => row.payment_id)
        .sort(),
    });
    const settle = (paymentId: string, status: 'delivered' | 'failed' | 'pending') =>
      db.dataSource.query(
        `UPDATE webhook_deliveries d SET status = $2, delivered_at = CASE WHEN $2 = 'delivered' THEN now() END
           FROM events e WHERE e.client_id = d.client_id AND e.id = d.event_id AND e.payment_id = $1`,
        [paymentId, status],
      );
    /** An instant after every event made so far, and before any made from now on. */
    async function cutoffNow(): Promise<number> {
      const cutoff = Date.now() + 1;
      await eventually(async () => (Date.now() >= cutoff ? true : undefined), { what: 'the clock to pass the cutoff' });
      return cutoff;
    }

    it('deletes old events with their settled deliveries, keeps one still being delivered, new ones and other clients’ events', async () => {
      const hooked = await given.clientWithWebhook();
      const delivered = (await given.succeeded(hooked)).payment.id;
      const failed = (await given.succeeded(hooked)).payment.id;
      const stillPending = (await given.succeeded(hooked)).payment.id;
      const noEndpoint = (await given.succeeded(clientId)).payment.id;
      const othersOld = (await given.succeeded(await given.clientWithWebhook())).payment.id;
      await settle(delivered, 'delivered');
      await settle(failed, 'failed');
      await settle(othersOld, 'delivered');
      const cutoff = await cutoffNow();
      const fresh = (await given.succeeded(hooked)).payment.id;
      await settle(fresh, 'delivered');

      expect(await given.events.countMadeBefore(manager(), hooked, cutoff, 100)).toBe(2);
      expect(await given.events.pruneMadeBefore(manager(), hooked, cutoff, 100)).toEqual({ events: 2, deliveries: 2 });
      expect(await given.events.pruneMadeBefore(manager(), clientId, cutoff, 100)).toEqual({ events: 1, deliveries: 0 });

      expect(await left()).toEqual({
        events: [stillPending, othersOld, fresh].sort(),
        deliveries: [stillPending, othersOld, fresh].sort(),
      });
      expect(await given.events.countMadeBefore(manager(), hooked, cutoff, 100)).toBe(0);
      // Once its delivery settles, the kept event goes at the next prune.
      await settle(stillPending, 'failed');
      expect(await given.events.pruneMadeBefore(manager(), hooked, cutoff, 100)).toEqual({ events: 1, deliveries: 1 });
      expect(noEndpoint).toBeDefined();
    });

    it('deletes at most a batch per statement, oldest first', async () => {
      const made: string[] = [];
      for (let i = 0; i < 5; i++) made.push((await given.succeeded(clientId)).payment.id);
      const cutoff = await cutoffNow();

      expect(await given.events.countMadeBefore(manager(), clientId, cutoff, 3)).toBe(3);
      expect(await given.events.pruneMadeBefore(manager(), clientId, cutoff, 2)).toEqual({ events: 2, deliveries: 0 });
      const afterOne = (await left()).events;
      expect(afterOne).toHaveLength(3);
      expect(made.slice(0, 2).some((id) => afterOne.includes(id))).toBe(false);
      expect(await given.events.pruneMadeBefore(manager(), clientId, cutoff, 2)).toEqual({ events: 2, deliveries: 0 });
      expect(await given.events.pruneMadeBefore(manager(), clientId, cutoff, 2)).toEqual({ events: 1, deliveries: 0 });
      expect(await given.events.pruneMadeBefore(manager(), clientId, cutoff, 2)).toEqual({ events: 0, deliveries: 0 });
    });

    it('passes over an event another transaction holds, without waiting for it', async () => {
      const held = (await given.succeeded(clientId)).payment.id;
      const free = (await given.succeeded(clientId)).payment.id;
      const cutoff = await cutoffNow();
      const runner = db.dataSource.createQueryRunner();
      await runner.connect();
      try {
        await runner.startTransaction();
        await runner.query(`SELECT id FROM events WHERE payment_id = $1 FOR UPDATE`, [held]);

        expect(await given.events.pruneMadeBefore(manager(), clientId, cutoff, 10)).toEqual({ events: 1, deliveries: 0 });
        expect((await left()).events).toEqual([held]);
        expect(free).toBeDefined();
      } finally {
        if (runner.isTransactionActive) await runner.rollbackTransaction();
        await runner.release();
      }
      expect(await given.events.pruneMadeBefore(manager(), clientId, cutoff, 10)).toEqual({ events: 1, deliveries: 0 });
    });
  });
});
