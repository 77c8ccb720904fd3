import { randomUUID } from 'node:crypto';
import type { DataSource, EntityManager } from 'typeorm';
import { CLIENT_TABLES, partitionByClient } from '../support/partition-by-client';
import { databaseUrlNamed, dropDatabase, openScratchDatabase } from '../support/scratch-database';
import { createClient, TEST_DATABASE_URL } from '../support/test-env';
import { eventually } from '../support/eventually';
import { ClientsRepository } from '../../src/clients/clients.repository';
import { loadConfig } from '../../src/config/app-config';
import { decisionOf } from '../../src/ledger/ledger.service';
import { IdempotencyRepository } from '../../src/ledger/idempotency.repository';
import type { Lease } from '../../src/ledger/lease';
import { EventsRepository } from '../../src/merchant-events/events.repository';
import { type DeliveryClaim, WebhookDeliveriesRepository } from '../../src/merchant-events/webhook-deliveries.repository';
import { newPendingPayment } from '../../src/payments/payment';
import { PAYMENTS, REFUNDS } from '../../src/ledger/operations';
import { newRefundId, providerRefundKeyFor } from '../../src/ledger/refund-id';
import { RefundsRepository } from '../../src/ledger/refunds.repository';
import type { Refund } from '../../src/ledger/refunds.table';
import { OperationsRepository } from '../../src/ledger/operations.repository';
import { PaymentsRepository } from '../../src/ledger/payments.repository';
import type { Payment } from '../../src/ledger/payments.table';
import { ProcessedMessagesRepository } from '../../src/provider-events/processed-messages.repository';

/**
 * The schema shards by client: every statement on the hot paths that works
 * on one payment names its client, so a Postgres that routes by client_id
 * (Citus) runs it on one shard. Proven on plain Postgres: the migrated schema
 * is rebuilt with every client-keyed table hash-partitioned by client_id,
 * the repositories' own statements are run against it and recorded with
 * their parameters, and EXPLAIN of each must name partitions of one
 * remainder only, the client's. The fan-outs (see docs/scaling.md) are
 * checked to be what they say: they reach every partition.
 */

const PARTITIONS = 4;

/** Statements that work on one client's rows: each must stay in that client's partition. */
const SINGLE_CLIENT = [
  'IdempotencyRepository.find',
  'PaymentsRepository.insertPendingUnderClaim',
  'IdempotencyRepository.renewLease',
  'IdempotencyRepository.takeOverLease',
  'OperationsRepository.recordOutcomeUnderLease',
  'OperationsRepository.recordOutcomeUnderLease (refund)',
  'RefundsRepository.listForClient',
  'IdempotencyRepository.release',
  'OperationsRepository.postponeUnderLease',
  'IdempotencyRepository.takeOverLeaseFor',
  'IdempotencyRepository.takeOverDueLeases',
  'IdempotencyRepository.lockHeldLeases',
  'OperationsRepository.findForClient',
  'PaymentsRepository.findForClient',
  'OperationsRepository.advanceProviderVersion',
  'ProcessedMessagesRepository.record',
  'PaymentsRepository.listForClient',
  'EventsRepository.findForClient',
  'EventsRepository.listForClient',
  'WebhookDeliveriesRepository.findClaimed',
  'WebhookDeliveriesRepository.recordFailure',
  'WebhookDeliveriesRepository.recordDelivered',
  'IdempotencyRepository.pruneExpired',
  'IdempotencyRepository.countExpired',
  'EventsRepository.countMadeBefore',
  'EventsRepository.pruneMadeBefore',
  'ProcessedMessagesRepository.countOlderThan',
  'ProcessedMessagesRepository.pruneOlderThan',
] as const;

/** Statements that look across clients by nature: they reach every partition. */
const FAN_OUT = [
  'OperationsRepository.findDueForReconciliation',
  'WebhookDeliveriesRepository.claimDue',
  'OperationsRepository.findByProviderKey',
  'PaymentsRepository.findById',
] as const;

type Label = (typeof SINGLE_CLIENT)[number] | (typeof FAN_OUT)[number];

interface Recorded {
  text: string;
  params: unknown[];
}

/** The manager with every statement it runs recorded under `label`: each repository method is one statement. */
function recording(manager: EntityManager, label: Label, into: Map<Label, Recorded>): EntityManager {
  return new Proxy(manager, {
    get(target, property, receiver) {
      // Without its query runner, a transaction's manager is asked through
      // `query` (see queryRows), which runs on the same transaction.
      if (property === 'queryRunner') return undefined;
      if (property !== 'query') return Reflect.get(target, property, receiver) as unknown;
      return (text: string, params: unknown[] = []) => {
        if (into.has(label)) throw new Error(`${label} ran a second statement`);
        into.set(label, { text, params });
        return target.query(text, params);
      };
    },
  });
}

/** The remainders of the partitions a plan reads or writes (a partitioned parent names none). */
function partitionsIn(plan: unknown): Set<number> {
  const found = new Set<number>();
  const walk = (node: unknown): void => {
    if (Array.isArray(node)) return node.forEach(walk);
    if (typeof node !== 'object' || node === null) return;
    for (const [key, value] of Object.entries(node)) {
      const partition = key === 'Relation Name' && typeof value === 'string' ? /_p(\d+)$/.exec(value) : null;
      if (partition) found.add(Number(partition[1]));
      walk(value);
    }
  };
  walk(plan);
  return found;
}

describe('the schema, hash-partitioned by client_id', () => {
  const name = `${new URL(TEST_DATABASE_URL).pathname.slice(1)}_sharding`;
  const databaseUrl = databaseUrlNamed(TEST_DATABASE_URL, name);
  const statements = new Map<Label, Recorded>();
  let dataSource: DataSource;
  let clientPartition: number;

  async function explain(label: Label): Promise<Set<number>> {
    const statement = statements.get(label);
    if (!statement) throw new Error(`${label} was not run`);
    const [row] = (await dataSource.query(`EXPLAIN (FORMAT JSON) ${statement.text}`, statement.params)) as {
      'QUERY PLAN': unknown;
    }[];
    return partitionsIn(row['QUERY PLAN']);
  }

  /** One payment's life through the repositories: a request, a review, the worker, a provider event, a webhook, pruning. */
  async function runHotPaths(clientId: string): Promise<void> {
    const keys = new IdempotencyRepository();
    const payments = new PaymentsRepository();
    const rows = new OperationsRepository();
    const events = new EventsRepository();
    const config = loadConfig({});
    const deliveries = new WebhookDeliveriesRepository();
    const messages = new ProcessedMessagesRepository();
    const as = (label: Label, db: EntityManager = dataSource.manager) => recording(db, label, statements);
    const leaseMs = 30_000;
    const lease: Lease = { clientId, key: randomUUID(), token: randomUUID() };

    await keys.find(as('IdempotencyRepository.find'), clientId, lease.key);
    const body = { amount: 500, currency: 'USD', payment_method: 'pm_card_ok', order_id: 'ord_1' };
    const payment = (await payments.insertPendingUnderClaim(
      as('PaymentsRepository.insertPendingUnderClaim'),
      newPendingPayment(clientId, body),
      { lease, fingerprint: 'f'.repeat(64), leaseMs, orExpired: true },
    )) as Payment;
    await keys.renewLease(as('IdempotencyRepository.renewLease'), lease, leaseMs);
    await keys.takeOverLease(as('IdempotencyRepository.takeOverLease'), lease, PAYMENTS, payment.id, leaseMs);
    const review = { status: 'requires_review', failureCode: 'x', failureMessage: 'x' } as const;
    await rows.recordOutcomeUnderLease(
      as('OperationsRepository.recordOutcomeUnderLease'),
      PAYMENTS,
      lease,
      payment,
      decisionOf(PAYMENTS, payment, review, config),
    );
    await keys.release(as('IdempotencyRepository.release'), lease);

    await rows.findDueForReconciliation(as('OperationsRepository.findDueForReconciliation'), PAYMENTS, 0, 10);
    const token = randomUUID();
    const workerLease = (await keys.takeOverLeaseFor(
      as('IdempotencyRepository.takeOverLeaseFor'),
      PAYMENTS,
      payment,
      token,
      leaseMs,
    )) as Lease;
    await rows.findForClient(as('OperationsRepository.findForClient'), PAYMENTS, payment);
    await payments.findForClient(as('PaymentsRepository.findForClient'), clientId, payment.id);
    await keys.takeOverDueLeases(as('IdempotencyRepository.takeOverDueLeases'), PAYMENTS, clientId, [payment.id], randomUUID(), leaseMs);
    await dataSource.transaction((tx) => keys.lockHeldLeases(as('IdempotencyRepository.lockHeldLeases', tx), [workerLease]));

    const later = { delayMs: 0, countAttempt: true };
    await rows.postponeUnderLease(as('OperationsRepository.postponeUnderLease'), PAYMENTS, workerLease, payment, later);

    await rows.findByProviderKey(as('OperationsRepository.findByProviderKey'), PAYMENTS, payment.providerKey);
    await dataSource.transaction(async (tx) => {
      await messages.record(as('ProcessedMessagesRepository.record', tx), clientId, 'provider-events', 'evt_1');
      await rows.advanceProviderVersion(as('OperationsRepository.advanceProviderVersion', tx), PAYMENTS, payment, 2);
      const eventLease = (await keys.takeOverLeaseFor(tx, PAYMENTS, payment, randomUUID(), leaseMs)) as Lease;
      const inReview = (await rows.findForClient(tx, PAYMENTS, payment)) as Payment;
      const succeeded = { status: 'succeeded', providerId: 'ch_1' } as const;
      await rows.recordOutcomeUnderLease(tx, PAYMENTS, eventLease, inReview, decisionOf(PAYMENTS, inReview, succeeded, config));
    });

    // A refund of the payment, decided by the statement every operation shares: its payment's sums move in it.
    const refunds = new RefundsRepository();
    const refundLease: Lease = { clientId, key: randomUUID(), token: randomUUID() };
    const refundId = newRefundId();
    const refund = (await refunds.insertPendingUnderClaim(
      dataSource.manager,
      { id: refundId, clientId, paymentId: payment.id, amount: 100, reason: null, metadata: {}, providerKey: providerRefundKeyFor(refundId) },
      { lease: refundLease, fingerprint: 'f'.repeat(64), leaseMs, orExpired: true },
    )) as Refund;
    const refunded = { status: 'succeeded', providerId: 'rf_1' } as const;
    await rows.recordOutcomeUnderLease(
      as('OperationsRepository.recordOutcomeUnderLease (refund)'),
      REFUNDS,
      refundLease,
      refund,
      decisionOf(REFUNDS, refund, refunded, config),
    );
    await refunds.listForClient(as('RefundsRepository.listForClient'), clientId, { limit: 10, paymentId: payment.id });

    await payments.listForClient(as('PaymentsRepository.listForClient'), clientId, { limit: 10, startingAfter: payment.id });
    // The list shows an event once every transaction older than its own has
    // ended, on the whole server (another test's included): wait for that
    // unrecorded, then record the one statement.
    await eventually(async () => (await events.listForClient(dataSource.manager, clientId, { limit: 1 })).events[0], {
      what: 'the event in the list',
    });
    const [event] = (await events.listForClient(as('EventsRepository.listForClient'), clientId, { limit: 1, startingAfter: undefined })).events;
    await events.findForClient(as('EventsRepository.findForClient'), clientId, event.id);
    await payments.findById(as('PaymentsRepository.findById'), payment.id);

    const claims = await deliveries.claimDue(as('WebhookDeliveriesRepository.claimDue'), {
      limit: 10,
      maxInFlightPerEndpoint: 10,
      claimMs: 60_000,
    });
    const claim = claims[0] as DeliveryClaim;
    await deliveries.findClaimed(as('WebhookDeliveriesRepository.findClaimed'), claim);
    const failure = { error: 'HTTP 500', retryInMs: 1_000, horizonHours: 72 };
    await deliveries.recordFailure(as('WebhookDeliveriesRepository.recordFailure'), claim, failure);
    await deliveries.recordDelivered(as('WebhookDeliveriesRepository.recordDelivered'), claim);

    await keys.countExpired(as('IdempotencyRepository.countExpired'), clientId, 10);
    await keys.pruneExpired(as('IdempotencyRepository.pruneExpired'), clientId, 10);
    await events.countMadeBefore(as('EventsRepository.countMadeBefore'), clientId, Date.now(), 10);
    await events.pruneMadeBefore(as('EventsRepository.pruneMadeBefore'), clientId, Date.now(), 10);
    await messages.countOlderThan(as('ProcessedMessagesRepository.countOlderThan'), clientId, 0, 10);
    await messages.pruneOlderThan(as('ProcessedMessagesRepository.pruneOlderThan'), clientId, 0, 10);
  }

  beforeAll(async () => {
    dataSource = await openScratchDatabase(databaseUrl);
    await partitionByClient(dataSource, PARTITIONS);
    // Clients enough that every partition holds some, and the one under test has neighbours.
    const clients = await Promise.all(
      Array.from({ length: 8 }, (_, i) => createClient(dataSource, `client ${i}`, { webhookUrl: 'http://127.0.0.1:9/hooks' })),
    );
    const clientId = clients[0].id;
    await runHotPaths(clientId);
    const [{ partition }] = (await dataSource.query(
      `SELECT tableoid::regclass::text AS partition FROM payments WHERE client_id = $1`,
      [clientId],
    )) as { partition: string }[];
    clientPartition = Number(/_p(\d+)$/.exec(partition)?.[1]);
    expect(await new ClientsRepository(dataSource).ids()).toHaveLength(clients.length);
  }, 60_000);

  afterAll(async () => {
    await dataSource?.destroy();
    await dropDatabase(TEST_DATABASE_URL, name);
  }, 30_000);

  it('is partitioned: every client-keyed table in four partitions, the keys and the trigger kept', async () => {
    const partitioned = (await dataSource.query(
      `SELECT c.relname AS table, count(i.inhrelid)::int AS partitions
         FROM pg_partitioned_table p JOIN pg_class c ON c.oid = p.partrelid LEFT JOIN pg_inherits i ON i.inhparent = c.oid
        GROUP BY c.relname ORDER BY c.relname`,
    )) as { table: string; partitions: number }[];
    expect(partitioned).toEqual([...CLIENT_TABLES].sort().map((table) => ({ table, partitions: PARTITIONS })));
    const [{ n }] = (await dataSource.query(
      `SELECT count(*)::int AS n FROM pg_trigger WHERE tgname = 'payments_status_event_check' AND tgrelid = 'payments'::regclass`,
    )) as { n: number }[];
    expect(n).toBe(1);
  });

  it.each(SINGLE_CLIENT)('%s touches one partition: its client’s', async (label) => {
    const touched = [...(await explain(label))];
    // An INSERT's rows are routed by the client_id they carry, so its plan may name no partition at all.
    expect(touched.every((remainder) => remainder === clientPartition)).toBe(true);
    if (!/^\s*(WITH\s+\w+\s+AS\s+\(\s*)?INSERT/i.test(statements.get(label)!.text)) expect(touched).toEqual([clientPartition]);
  });

  it.each(FAN_OUT)('%s reaches every partition: a documented fan-out', async (label) => {
    expect((await explain(label)).size).toBe(PARTITIONS);
  });
});
