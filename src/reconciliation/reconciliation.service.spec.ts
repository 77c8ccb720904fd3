import { Logger } from '@nestjs/common';
import type { Queue } from 'bullmq';
import type { EntityManager } from 'typeorm';
import type { ClientsRepository } from '../clients/clients.repository';
import { CrashPoint } from '../common/crash-point';
import { strictMock } from '../common/strict-mock.fixture';
import type { Lease } from '../ledger/lease';
import { ledgerMocks, recordsOutcomes } from '../ledger/ledger.fixture';
import type { OperationName, RowRef } from '../ledger/operation';
import { PAYMENTS, REFUNDS } from '../ledger/operations';
import { Metrics } from '../metrics/metrics';
import { PAYMENT_SIDE, REFUND_SIDE, chargeInputFor } from '../operations/provider-side';
import { aPayment } from '../ledger/payment.fixture';
import type { Payment } from '../ledger/payments.table';
import type { Refund } from '../ledger/refunds.table';
import { aRefund } from '../ledger/refund.fixture';
import type { ProviderCharge } from '../provider/provider.client';
import { JobName, RECONCILE_JOB_PAYMENTS } from './reconciliation.constants';
import { ReconciliationService } from './reconciliation.service';

const charge: ProviderCharge = { id: 'ch_1', status: 'succeeded', amount: 500, currency: 'USD', failure_code: null };
const pendingCharge: ProviderCharge = { ...charge, status: 'pending' };
/** The payment every reconcile case works on, as a job names it; its lease (see takesLease) is its client's. */
const PAY_1 = { clientId: 'client_1', id: 'pay_1' };
const noAnswer = { kind: 'unknown', gaveUp: 'deadline', reason: 'no answer within 2000 ms', attempts: 1 } as const;

function setup(env: Record<string, string> = {}) {
  const { db, transaction, dataSource: source, keys, rows, provider, config, ledger } = ledgerMocks(env);
  const dataSource = { transaction };
  const queue = strictMock<Queue>('queue');
  const metrics = new Metrics();
  const clients = strictMock<ClientsRepository>('clients');
  const sut = new ReconciliationService(
    source,
    clients,
    keys,
    rows,
    ledger,
    provider,
    queue,
    config,
    new CrashPoint(config),
    metrics,
  );

  /** The worker takes the payment's lease; the lease it got is what every fenced write must present. */
  const takesLease = () => {
    keys.takeOverLeaseFor = jest.fn(async (_db, _operation, _ref, token, _leaseMs) => ({
      clientId: 'client_1',
      key: 'key-1',
      token,
    }));
    return (): Lease =>
      expect.objectContaining({ clientId: 'client_1', key: 'key-1', token: keys.takeOverLeaseFor.mock.calls[0][3] });
  };
  const finds = (row: Payment | Refund | undefined) => {
    rows.findForClient = jest.fn().mockResolvedValue(row);
  };
  /** The decision statement, answering as Postgres does while the lease holds. */
  const recordsOutcome = () => {
    rows.recordOutcomeUnderLease = recordsOutcomes();
  };
  /** The postponing statement, under a lease that holds: the next look scheduled, the lease released. */
  const postpones = () => {
    rows.postponeUnderLease = jest.fn().mockResolvedValue(true);
  };
  /** A move to review: the decision statement, with no answer for the key and the first re-check. */
  const sendsToReview = () => recordsOutcome();
  /** What the one decision statement was sent. */
  const decision = () => rows.recordOutcomeUnderLease.mock.calls[0][4];
  return {
    sut,
    db,
    dataSource,
    clients,
    keys,
    rows,
    provider,
    queue,
    config,
    metrics,
    takesLease,
    finds,
    recordsOutcome,
    postpones,
    sendsToReview,
    decision,
  };
}

/** reconcile_outcomes_total by outcome. */
async function outcomesCounted(metrics: Metrics): Promise<Record<string, number>> {
  const { values } = await metrics.reconcileOutcomes.get();
  return Object.fromEntries(values.map(({ labels, value }) => [String(labels.outcome), value]));
}

describe('ReconciliationService', () => {
  beforeAll(() => Logger.overrideLogger(false));
  afterEach(() => {
    jest.useRealTimers();
    jest.restoreAllMocks();
  });

  describe('sweep', () => {
    const running = new AbortController().signal;
    const opts = { removeOnComplete: true, removeOnFail: true };
    const job = (ids: string[], clientId = 'client_1', operation: OperationName = 'payment') => ({
      name: JobName.Reconcile,
      data: { clientId, operation, ids },
      opts,
    });
    /** Due rows of one client, as findDueForReconciliation returns them. */
    const due = (...ids: string[]) => ids.map((id) => ({ clientId: 'client_1', id }));
    const ids = (prefix: string, count: number) => Array.from({ length: count }, (_, i) => `${prefix}_${i}`);
    /**
     * findDueForReconciliation answering, for each operation, its batches in
     * turn and then nothing: a sweep covers payments, then refunds.
     */
    const findsDue = (rows: ReturnType<typeof setup>['rows'], batches: Partial<Record<OperationName, RowRef[][]>>) => {
      const left = { payment: [...(batches.payment ?? [])], refund: [...(batches.refund ?? [])] };
      rows.findDueForReconciliation = jest.fn(
        async (_db, operation, _staleAfterMs, _limit, _excluding) => left[operation.name].shift() ?? [],
      );
    };
    /** Which operation each findDueForReconciliation call asked about, in order. */
    const operationsAsked = (rows: ReturnType<typeof setup>['rows']) =>
      rows.findDueForReconciliation.mock.calls.map(([, operation]) => operation.name);

    it('enqueues the due payments in jobs of one client each, at most RECONCILE_JOB_PAYMENTS a job', async () => {
      const { sut, db, rows, queue, config } = setup();
      const many = ids('pay_a', 2 * RECONCILE_JOB_PAYMENTS + 5);
      findsDue(rows, { payment: [[{ clientId: 'client_b', id: 'pay_b' }, ...many.map((id) => ({ clientId: 'client_a', id }))]] });
      queue.addBulk = jest.fn().mockResolvedValue([]);

      expect(await sut.sweep(running)).toBe(many.length + 1);

      const { staleAfterMs, batchSize } = config.reconcile;
      expect(rows.findDueForReconciliation.mock.calls).toEqual([
        [db, PAYMENTS, staleAfterMs, batchSize, []],
        [db, REFUNDS, staleAfterMs, batchSize, []],
      ]);
      expect(queue.addBulk.mock.calls).toEqual([
        [
          [
            job(['pay_b'], 'client_b'),
            job(many.slice(0, RECONCILE_JOB_PAYMENTS), 'client_a'),
            job(many.slice(RECONCILE_JOB_PAYMENTS, 2 * RECONCILE_JOB_PAYMENTS), 'client_a'),
            job(many.slice(2 * RECONCILE_JOB_PAYMENTS), 'client_a'),
          ],
        ],
      ]);
      // queue.getWaitingCount is not stubbed: a short batch is all that is due, so there is nothing to wait for.
    });

    it('sweeps the refunds after the payments, in jobs that name their operation', async () => {
      const { sut, rows, queue } = setup();
      findsDue(rows, { payment: [due('pay_a')], refund: [[...due('re_a', 're_b'), { clientId: 'client_b', id: 're_c' }]] });
      queue.addBulk = jest.fn().mockResolvedValue([]);

      expect(await sut.sweep(running)).toBe(4);

      expect(operationsAsked(rows)).toEqual(['payment', 'refund']);
      expect(queue.addBulk.mock.calls).toEqual([
        [[job(['pay_a'])]],
        [[job(['re_a', 're_b'], 'client_1', 'refund'), job(['re_c'], 'client_b', 'refund')]],
      ]);
    });

    it('touches no queue when nothing is due', async () => {
      const { sut, rows } = setup();
      findsDue(rows, {});

      expect(await sut.sweep(running)).toBe(0);
      expect(operationsAsked(rows)).toEqual(['payment', 'refund']);
      // queue.addBulk is not stubbed: an empty bulk would have thrown.
    });

    it('after a full batch, queues the next once the workers have taken half of it, never what it queued before', async () => {
      const size = 4 * RECONCILE_JOB_PAYMENTS;
      const { sut, rows, queue, config } = setup({ RECONCILE_BATCH_SIZE: String(size) });
      const [first, second, third] = [ids('pay_a', size), ids('pay_b', size), ids('pay_c', 3)];
      findsDue(rows, { payment: [due(...first), due(...second), due(...third)] });
      queue.addBulk = jest.fn().mockResolvedValue([]);
      // Four jobs still wait, then three, then two (half the batch): room for the next batch.
      queue.getWaitingCount = jest
        .fn()
        .mockResolvedValueOnce(4)
        .mockResolvedValueOnce(3)
        .mockResolvedValueOnce(2)
        .mockResolvedValueOnce(1);

      expect(await sut.sweep(running)).toBe(2 * size + 3);

      // Each pass passes over what the earlier passes queued (those still waiting are not queued twice).
      const { staleAfterMs } = config.reconcile;
      expect(rows.findDueForReconciliation.mock.calls).toEqual([
        [expect.anything(), PAYMENTS, staleAfterMs, size, []],
        [expect.anything(), PAYMENTS, staleAfterMs, size, first],
        [expect.anything(), PAYMENTS, staleAfterMs, size, [...first, ...second]],
        [expect.anything(), REFUNDS, staleAfterMs, size, []],
      ]);
      expect(queue.addBulk.mock.calls.map(([jobs]) => jobs.length)).toEqual([4, 4, 1]);
      expect(queue.getWaitingCount).toHaveBeenCalledTimes(4);
    });

    it('stops waiting for room after one interval, leaving the rest to the next sweep', async () => {
      const { sut, rows, queue } = setup({ RECONCILE_BATCH_SIZE: '2', RECONCILE_INTERVAL_MS: '300' });
      findsDue(rows, { payment: [due('pay_a', 'pay_b'), due('pay_c', 'pay_d')] });
      queue.addBulk = jest.fn().mockResolvedValue([]);
      // The workers take nothing.
      queue.getWaitingCount = jest.fn().mockResolvedValue(2);
      const started = performance.now();

      expect(await sut.sweep(running)).toBe(2);

      expect(performance.now() - started).toBeGreaterThanOrEqual(290);
      // One batch of payments; the refunds are still looked at, once, within what was left of the interval.
      expect(operationsAsked(rows)).toEqual(['payment', 'refund']);
      expect(queue.getWaitingCount.mock.calls.length).toBeGreaterThan(0);
    });

    it('stops waiting as soon as the worker is stopping, so its close does not wait out the interval', async () => {
      const { sut, rows, queue } = setup({ RECONCILE_BATCH_SIZE: '2', RECONCILE_INTERVAL_MS: '600000' });
      findsDue(rows, { payment: [due('pay_a', 'pay_b'), due('pay_c', 'pay_d')], refund: [due('re_a', 're_b'), due('re_c', 're_d')] });
      queue.addBulk = jest.fn().mockResolvedValue([]);
      const stopping = new AbortController();
      queue.getWaitingCount = jest.fn(async () => {
        stopping.abort();
        return 2;
      });

      expect(await sut.sweep(stopping.signal)).toBe(4);

      expect(queue.getWaitingCount).toHaveBeenCalledTimes(1);
      // One batch of each: a full batch of refunds, once stopping, waits for nothing.
      expect(operationsAsked(rows)).toEqual(['payment', 'refund']);
    });
  });

  describe('reconcile', () => {
    it('skips a payment whose lease it cannot take, reading and writing nothing', async () => {
      const { sut, db, keys, dataSource, config, metrics } = setup();
      keys.takeOverLeaseFor = jest.fn().mockResolvedValue(undefined);

      expect(await sut.reconcile(PAYMENT_SIDE, PAY_1)).toBe('skipped');
      expect(await outcomesCounted(metrics)).toEqual({ settled: 0, postponed: 0, requires_review: 0, skipped: 1 });

      expect(keys.takeOverLeaseFor).toHaveBeenCalledWith(
        db,
        PAYMENTS,
        PAY_1,
        expect.any(String),
        config.idempotency.leaseMs,
      );
      // rows.findForClient and the provider are not stubbed: the job stopped at the lease.
      expect(dataSource.transaction).not.toHaveBeenCalled();
    });

    it.each([
      ['a succeeded charge', charge, { status: 'succeeded', providerId: 'ch_1' }, 201],
      [
        'a declined charge',
        { ...charge, status: 'failed' as const, failure_code: 'card_declined' },
        { status: 'failed', providerId: 'ch_1', failureCode: 'card_declined' },
        402,
      ],
    ])('records %s from one call presenting the charge under its key and its lease', async (_name, answered, outcome, status) => {
      const { sut, db, rows, provider, dataSource, config, takesLease, finds, recordsOutcome } = setup();
      const leaseTaken = takesLease();
      const payment = aPayment();
      finds(payment);
      provider.createCharge = jest.fn().mockResolvedValue({ kind: 'answered', charge: answered });
      recordsOutcome();

      expect(await sut.reconcile(PAYMENT_SIDE, PAY_1)).toBe('settled');

      // One call, no in-call retries: the reconciliation ladder is this hop's only retry layer.
      // The provider's POST is idempotent per provider key: a charge it holds is
      // answered as it now is, one it never received is made, never a second.
      expect(provider.createCharge).toHaveBeenCalledTimes(1);
      const [input, options] = provider.createCharge.mock.calls[0];
      expect(input).toEqual(chargeInputFor(payment));
      expect(input.providerKey).toBe('pk_pay_1');
      expect(options).toEqual({ clientId: 'client_1', maxAttempts: 1, deadlineMs: config.provider.deadlineMs });
      expect(rows.recordOutcomeUnderLease).toHaveBeenCalledTimes(1);
      expect(rows.recordOutcomeUnderLease).toHaveBeenCalledWith(
        db,
        PAYMENTS,
        leaseTaken(),
        payment,
        expect.objectContaining({ outcome: expect.objectContaining(outcome), answer: expect.objectContaining({ status }) }),
      );
      // One statement: no transaction to open.
      expect(dataSource.transaction).not.toHaveBeenCalled();
      // provider.getCharge and keys.renewLease are not stubbed: no lookup first,
      // and a fresh lease outlasts the call without a statement.
    });

    it('renews a lease that might run out during the call before presenting the charge', async () => {
      jest.useFakeTimers({ now: new Date('2026-11-29T10:00:00Z') });
      const { sut, db, keys, rows, provider, config, takesLease, recordsOutcome } = setup();
      const leaseTaken = takesLease();
      rows.findForClient = jest.fn().mockImplementation(async () => {
        // A stall shorter than the lease, but too long for the lease to outlast the call.
        jest.advanceTimersByTime(config.idempotency.leaseMs - config.provider.deadlineMs + 1);
        return aPayment();
      });
      keys.renewLease = jest.fn().mockResolvedValue(true);
      provider.createCharge = jest.fn().mockResolvedValue({ kind: 'answered', charge });
      recordsOutcome();

      expect(await sut.reconcile(PAYMENT_SIDE, PAY_1)).toBe('settled');

      expect(keys.renewLease).toHaveBeenCalledWith(db, leaseTaken(), config.idempotency.leaseMs);
      expect(keys.renewLease.mock.invocationCallOrder[0]).toBeLessThan(provider.createCharge.mock.invocationCallOrder[0]);
    });

    it('submits nothing when it stalled past its lease and the lease was taken over', async () => {
      jest.useFakeTimers({ now: new Date('2026-11-29T10:00:00Z') });
      const { sut, keys, rows, config, takesLease } = setup();
      takesLease();
      rows.findForClient = jest.fn().mockImplementation(async () => {
        // A stall (a long GC pause) right after the lease was taken, longer than the lease.
        jest.advanceTimersByTime(config.idempotency.leaseMs);
        return aPayment();
      });
      keys.renewLease = jest.fn().mockResolvedValue(false);

      expect(await sut.reconcile(PAYMENT_SIDE, PAY_1)).toBe('skipped');

      expect(keys.renewLease).toHaveBeenCalledTimes(1);
      // provider.createCharge and every write are not stubbed: reaching any would have thrown.
    });

    it.each([
      ['the provider holds the charge as pending', { kind: 'answered', charge: pendingCharge }],
      ['the call got no answer in time', noAnswer],
    ])('postpones, counting the attempt and releasing the lease, when %s', async (_name, answer) => {
      const { sut, db, rows, provider, takesLease, finds, postpones } = setup();
      const leaseTaken = takesLease();
      finds(aPayment({ reconcileAttempts: 2 }));
      provider.createCharge = jest.fn().mockResolvedValue(answer);
      postpones();

      expect(await sut.reconcile(PAYMENT_SIDE, PAY_1)).toBe('postponed');

      expect(rows.postponeUnderLease).toHaveBeenCalledWith(db, PAYMENTS, leaseTaken(), PAY_1, {
        delayMs: expect.any(Number),
        countAttempt: true,
      });
      // rows.recordOutcomeUnderLease is not stubbed: nothing was decided.
    });

    it.each([
      [0, 0],
      [0, 0.9999],
      [3, 0],
      [3, 0.9999],
      // One rung before the last: still a delay, not a review.
      [6, 0.9999],
    ])('waits within the equal-jitter rung after %i attempts (random %d)', async (attempts, random) => {
      const { sut, rows, provider, config, takesLease, finds, postpones } = setup();
      jest.spyOn(Math, 'random').mockReturnValue(random);
      takesLease();
      finds(aPayment({ reconcileAttempts: attempts }));
      provider.createCharge = jest.fn().mockResolvedValue({ kind: 'answered', charge: pendingCharge });
      postpones();

      expect(await sut.reconcile(PAYMENT_SIDE, PAY_1)).toBe('postponed');

      const { backoffBaseMs, backoffCapMs } = config.reconcile;
      const e = Math.min(backoffCapMs, backoffBaseMs * 2 ** attempts);
      const { delayMs } = rows.postponeUnderLease.mock.calls[0][4];
      expect(Number.isInteger(delayMs)).toBe(true);
      expect(delayMs).toBeGreaterThanOrEqual(e / 2);
      expect(delayMs).toBeLessThanOrEqual(e);
    });

    it('never waits longer than the cap, however many attempts were made', async () => {
      const { sut, rows, provider, config, takesLease, finds, postpones } = setup({
        RECONCILE_MAX_ATTEMPTS: '40',
      });
      jest.spyOn(Math, 'random').mockReturnValue(0.9999);
      takesLease();
      finds(aPayment({ reconcileAttempts: 30 }));
      provider.createCharge = jest.fn().mockResolvedValue(noAnswer);
      postpones();

      expect(await sut.reconcile(PAYMENT_SIDE, PAY_1)).toBe('postponed');

      const { delayMs } = rows.postponeUnderLease.mock.calls[0][4];
      expect(delayMs).toBeGreaterThanOrEqual(config.reconcile.backoffCapMs / 2);
      expect(delayMs).toBeLessThanOrEqual(config.reconcile.backoffCapMs);
    });

    it.each([['the call', { kind: 'unknown', gaveUp: 'breaker_open', reason: 'circuit open', attempts: 1 }]])(
      'defers without counting an attempt, even on the last rung, when the breaker refused %s',
      async (_name, refused) => {
        const { sut, db, rows, provider, config, takesLease, finds, postpones } = setup();
        const leaseTaken = takesLease();
        // On the last rung a counted attempt would send the payment to review.
        finds(aPayment({ reconcileAttempts: config.reconcile.maxAttempts - 1 }));
        provider.createCharge = jest.fn().mockResolvedValue(refused);
        provider.unavailableForMs = jest.fn().mockReturnValue(4_200);
        postpones();

        expect(await sut.reconcile(PAYMENT_SIDE, PAY_1)).toBe('postponed');

        // The payment's client's circuits: another client's open circuit never defers it.
        expect(provider.unavailableForMs).toHaveBeenCalledWith('client_1');
        expect(rows.postponeUnderLease).toHaveBeenCalledWith(db, PAYMENTS, leaseTaken(), PAY_1, {
          delayMs: 4_200,
          countAttempt: false,
        });
        // rows.recordOutcomeUnderLease is not stubbed: no review was recorded.
      },
    );

    it('hands the payment to review once the last rung gives no final answer', async () => {
      const { sut, db, rows, provider, config, metrics, takesLease, finds, sendsToReview, decision } = setup();
      const leaseTaken = takesLease();
      const { maxAttempts } = config.reconcile;
      finds(aPayment({ reconcileAttempts: maxAttempts - 1 }));
      provider.createCharge = jest.fn().mockResolvedValue({ kind: 'answered', charge: pendingCharge });
      sendsToReview();

      expect(await sut.reconcile(PAYMENT_SIDE, PAY_1)).toBe('requires_review');
      expect(await outcomesCounted(metrics)).toEqual({ settled: 0, postponed: 0, requires_review: 1, skipped: 0 });

      expect(rows.recordOutcomeUnderLease).toHaveBeenCalledWith(
        db,
        PAYMENTS,
        leaseTaken(),
        expect.objectContaining(PAY_1),
        expect.objectContaining({
          outcome: {
            status: 'requires_review',
            failureCode: 'reconciliation_exhausted',
            failureMessage: expect.stringContaining(`after ${maxAttempts} reconciliation attempts`),
          },
        }),
      );
      // Not final: nothing stored on the key (the statement releases the lease), the first re-check an interval away.
      expect(decision().answer).toBeUndefined();
      expect(decision().recheckInMs).toBe(config.reconcile.reviewRecheckIntervalMs);
    });

    it.each(['succeeded', 'failed', 'pending'] as const)(
      'sends a %s charge for another amount to review',
      async (status) => {
        const { sut, db, rows, provider, takesLease, finds, sendsToReview, decision } = setup();
        takesLease();
        finds(aPayment({ amount: 500 }));
        provider.createCharge = jest.fn().mockResolvedValue({ kind: 'answered', charge: { ...charge, status, amount: 400 } });
        sendsToReview();

        expect(await sut.reconcile(PAYMENT_SIDE, PAY_1)).toBe('requires_review');

        expect(rows.recordOutcomeUnderLease).toHaveBeenCalledWith(
          db,
          PAYMENTS,
          expect.anything(),
          expect.objectContaining(PAY_1),
          expect.objectContaining({
            outcome: expect.objectContaining({ status: 'requires_review', failureCode: 'provider_charge_mismatch' }),
          }),
        );
        expect(decision().answer).toBeUndefined();
      },
    );

    it.each([
      ['recording an outcome', { kind: 'answered', charge }, false],
      ['postponing', { kind: 'answered', charge: pendingCharge }, false],
      ['handing the payment to review', { kind: 'answered', charge: pendingCharge }, true],
      ['deferring while the breaker is open', { ...noAnswer, gaveUp: 'breaker_open' }, false],
    ])('writes nothing when its lease was taken over before %s', async (_name, answer, lastRung) => {
      const { sut, db, rows, provider, dataSource, config, takesLease, finds } = setup();
      const leaseTaken = takesLease();
      finds(aPayment({ reconcileAttempts: lastRung ? config.reconcile.maxAttempts - 1 : 0 }));
      provider.createCharge = jest.fn().mockResolvedValue(answer);
      provider.unavailableForMs = jest.fn().mockReturnValue(1_000);
      // Both fenced statements find another token on the key: they write nothing and say so.
      rows.recordOutcomeUnderLease = jest.fn().mockResolvedValue({ kind: 'lease_lost' });
      rows.postponeUnderLease = jest.fn().mockResolvedValue(false);

      expect(await sut.reconcile(PAYMENT_SIDE, PAY_1)).toBe('skipped');

      const sent = [...rows.recordOutcomeUnderLease.mock.calls, ...rows.postponeUnderLease.mock.calls];
      expect(sent.map(([manager, operation, lease]) => [manager, operation, lease])).toEqual([[db, PAYMENTS, leaseTaken()]]);
      expect(dataSource.transaction).not.toHaveBeenCalled();
      // No other write is stubbed (keys.release): any would have thrown.
    });

    it.each([
      ['a final payment', aPayment({ status: 'succeeded', providerChargeId: 'ch_1' })],
      ['a missing payment', undefined],
    ])('throws on %s under an unfinished key, asking the provider nothing', async (_name, payment) => {
      const { sut, dataSource, takesLease, finds } = setup();
      takesLease();
      finds(payment);

      await expect(sut.reconcile(PAYMENT_SIDE, PAY_1)).rejects.toThrow('has an unfinished key but is already final');

      // The provider is not stubbed: the job stopped before any call.
      expect(dataSource.transaction).not.toHaveBeenCalled();
    });
  });

  describe('reconcileBatch', () => {
    const PAY_IDS = ['pay_1', 'pay_2', 'pay_3'];
    /** The job's statement takes the leases of pay_1 and pay_2 (pay_3 is no longer due), under one token. */
    const takesBatch = (keys: ReturnType<typeof setup>['keys'], ...taken: (Payment | Refund)[]) => {
      keys.takeOverDueLeases = jest.fn().mockImplementation(async () =>
        taken.map((row, index) => ({ key: `key-${index + 1}`, row })),
      );
      return (index: number): Lease =>
        expect.objectContaining({ clientId: 'client_1', key: `key-${index + 1}`, token: keys.takeOverDueLeases.mock.calls[0][4] });
    };

    it('takes the due payments in one statement, asks about each, and records the final answers in one commit', async () => {
      const { sut, db, keys, rows, provider, dataSource, config, recordsOutcome } = setup();
      const lease = takesBatch(keys, aPayment({ id: 'pay_1' }), aPayment({ id: 'pay_2' }));
      provider.createCharge = jest.fn().mockResolvedValue({ kind: 'answered', charge });
      recordsOutcome();
      keys.lockHeldLeases = jest.fn(async (_db, leases) => new Set(leases.map(({ key }: Lease) => key)));

      expect(await sut.reconcileBatch(PAYMENT_SIDE, 'client_1', PAY_IDS)).toEqual({ settled: 2, skipped: 1 });

      expect(keys.takeOverDueLeases).toHaveBeenCalledWith(db, PAYMENTS, 'client_1', PAY_IDS, expect.any(String), config.idempotency.leaseMs);
      expect(provider.createCharge.mock.calls.map(([input]) => input.reference)).toEqual(['pay_1', 'pay_2']);
      expect(dataSource.transaction).toHaveBeenCalledTimes(1);
      expect(keys.lockHeldLeases).toHaveBeenCalledWith(db, [lease(0), lease(1)]);
      // Each decided by the outcome statement, inside the batch's one transaction.
      expect(rows.recordOutcomeUnderLease.mock.calls.map(([manager, , held, payment]) => [manager, held, payment.id])).toEqual([
        [db, lease(0), 'pay_1'],
        [db, lease(1), 'pay_2'],
      ]);
    });

    it('writes nothing for a payment whose lease was lost by the time the answers are recorded', async () => {
      const { sut, keys, rows, provider, recordsOutcome } = setup();
      const lease = takesBatch(keys, aPayment({ id: 'pay_1' }), aPayment({ id: 'pay_2' }));
      provider.createCharge = jest.fn().mockResolvedValue({ kind: 'answered', charge });
      recordsOutcome();
      keys.lockHeldLeases = jest.fn().mockResolvedValue(new Set(['key-2']));

      expect(await sut.reconcileBatch(PAYMENT_SIDE, 'client_1', PAY_IDS)).toEqual({ settled: 1, skipped: 2 });

      expect(rows.recordOutcomeUnderLease.mock.calls.map(([, , held, payment]) => [held, payment.id])).toEqual([[lease(1), 'pay_2']]);
    });

    it('writes what is not final at once, payment by payment, and only the final answers together', async () => {
      const { sut, db, keys, rows, provider, dataSource, metrics, recordsOutcome, postpones } = setup();
      const lease = takesBatch(keys, aPayment({ id: 'pay_1' }), aPayment({ id: 'pay_2' }));
      provider.createCharge = jest
        .fn()
        .mockResolvedValueOnce({ kind: 'answered', charge: pendingCharge })
        .mockResolvedValueOnce({ kind: 'answered', charge });
      recordsOutcome();
      postpones();
      keys.lockHeldLeases = jest.fn(async (_db, leases) => new Set(leases.map(({ key }: Lease) => key)));

      expect(await sut.reconcileBatch(PAYMENT_SIDE, 'client_1', PAY_IDS)).toEqual({ postponed: 1, settled: 1, skipped: 1 });
      expect(await outcomesCounted(metrics)).toEqual({ settled: 1, postponed: 1, requires_review: 0, skipped: 1 });

      expect(rows.postponeUnderLease).toHaveBeenCalledWith(db, PAYMENTS, lease(0), expect.objectContaining({ id: 'pay_1' }), {
        delayMs: expect.any(Number),
        countAttempt: true,
      });
      // One final answer is one statement: no transaction around it, no locks taken first.
      expect(rows.recordOutcomeUnderLease.mock.calls.map(([manager, , held, payment]) => [manager, held, payment.id])).toEqual([
        [db, lease(1), 'pay_2'],
      ]);
      expect(dataSource.transaction).not.toHaveBeenCalled();
    });

    /** The decision statement, failing as Postgres does for the payment named (22021: U+0000 in text) and recording the others. */
    const refusesOutcomeOf = (rows: ReturnType<typeof setup>['rows'], refusedId: string) => {
      const records = recordsOutcomes();
      rows.recordOutcomeUnderLease = jest.fn().mockImplementation(async (...args: Parameters<typeof records>) => {
        if (args[3].id === refusedId) throw Object.assign(new Error('invalid byte sequence for encoding "UTF8": 0x00'), { code: '22021' });
        return records(...args);
      });
    };

    it('records the others when one final answer cannot be written, and counts an attempt for that one', async () => {
      const { sut, db, keys, rows, provider, dataSource, postpones } = setup();
      const lease = takesBatch(keys, aPayment({ id: 'pay_1' }), aPayment({ id: 'pay_2' }), aPayment({ id: 'pay_3' }));
      provider.createCharge = jest.fn().mockResolvedValue({ kind: 'answered', charge });
      refusesOutcomeOf(rows, 'pay_2');
      postpones();
      keys.lockHeldLeases = jest.fn(async (_db, leases) => new Set(leases.map(({ key }: Lease) => key)));

      expect(await sut.reconcileBatch(PAYMENT_SIDE, 'client_1', PAY_IDS)).toEqual({ settled: 2, postponed: 1 });

      // The batch's transaction failed as a whole; each payment was then recorded alone.
      expect(dataSource.transaction).toHaveBeenCalledTimes(1);
      expect(rows.recordOutcomeUnderLease.mock.calls.map(([, , , payment]) => payment.id)).toEqual([
        'pay_1', 'pay_2', 'pay_1', 'pay_2', 'pay_3',
      ]);
      expect(rows.postponeUnderLease).toHaveBeenCalledTimes(1);
      expect(rows.postponeUnderLease).toHaveBeenCalledWith(db, PAYMENTS, lease(1), expect.objectContaining({ id: 'pay_2' }), {
        delayMs: expect.any(Number),
        countAttempt: true,
      });
    });

    it('sends a payment whose answer never can be written to review at the end of the ladder', async () => {
      const { sut, keys, rows, provider } = setup({ RECONCILE_MAX_ATTEMPTS: '3' });
      takesBatch(keys, aPayment({ id: 'pay_1', reconcileAttempts: 2 }));
      provider.createCharge = jest.fn().mockResolvedValue({ kind: 'answered', charge });
      const records = recordsOutcomes();
      rows.recordOutcomeUnderLease = jest.fn().mockImplementation(async (...args: Parameters<typeof records>) => {
        if (args[4].outcome.status !== 'requires_review') throw new Error('invalid byte sequence for encoding "UTF8": 0x00');
        return records(...args);
      });

      expect(await sut.reconcileBatch(PAYMENT_SIDE, 'client_1', PAY_IDS)).toEqual({ requires_review: 1, skipped: 2 });

      expect(rows.recordOutcomeUnderLease.mock.calls.map(([, , , , decision]) => decision.outcome.status)).toEqual([
        'succeeded',
        'requires_review',
      ]);
      expect(rows.recordOutcomeUnderLease.mock.calls[1][4].outcome).toMatchObject({ failureCode: 'reconciliation_exhausted' });
    });

    it('asks nothing and writes nothing when it took no payment', async () => {
      const { sut, keys, dataSource } = setup();
      takesBatch(keys);

      expect(await sut.reconcileBatch(PAYMENT_SIDE, 'client_1', PAY_IDS)).toEqual({ skipped: 3 });

      // The provider is not stubbed: no call was made.
      expect(dataSource.transaction).not.toHaveBeenCalled();
    });
  });

  describe('reconcile, for a payment in review', () => {
    const inReview = (overrides: Partial<Payment> = {}) =>
      aPayment({
        status: 'requires_review',
        failureCode: 'reconciliation_exhausted',
        updatedAt: new Date(Date.now() - 60_000),
        ...overrides,
      });

    it.each([
      ['succeeded', charge, 201],
      ['failed', { ...charge, status: 'failed', failure_code: 'card_declined' }, 402],
    ] as const)('settles it once the provider’s charge is %s, storing the final response', async (_s, found, code) => {
      const { sut, db, rows, provider, takesLease, finds, recordsOutcome } = setup();
      takesLease();
      finds(inReview());
      provider.getCharge = jest.fn().mockResolvedValue({ kind: 'found', charge: found });
      recordsOutcome();

      expect(await sut.reconcile(PAYMENT_SIDE, PAY_1)).toBe('settled');

      expect(rows.recordOutcomeUnderLease).toHaveBeenCalledWith(
        db,
        PAYMENTS,
        expect.anything(),
        expect.objectContaining(PAY_1),
        expect.objectContaining({
          outcome: expect.objectContaining({ status: found.status }),
          answer: expect.objectContaining({ status: code, ttlHours: 24 }),
        }),
      );
      // provider.createCharge is not stubbed: a review is never resubmitted.
    });

    it.each([
      ['the charge is still pending', { kind: 'found', charge: pendingCharge }],
      ['the provider never received it', { kind: 'not_found' }],
      ['the lookup got no answer', noAnswer],
      ['the charge is for another amount', { kind: 'found', charge: { ...charge, amount: 1 } }],
    ])('asks again one interval later when %s, counting nothing', async (_name, lookup) => {
      const { sut, db, rows, provider, config, takesLease, finds, postpones } = setup({
        REVIEW_RECHECK_INTERVAL_MS: '60000',
      });
      takesLease();
      finds(inReview());
      provider.getCharge = jest.fn().mockResolvedValue(lookup);
      postpones();

      expect(await sut.reconcile(PAYMENT_SIDE, PAY_1)).toBe('postponed');

      expect(rows.postponeUnderLease).toHaveBeenCalledWith(db, PAYMENTS, expect.anything(), PAY_1, {
        delayMs: config.reconcile.reviewRecheckIntervalMs,
        countAttempt: false,
      });
    });

    it('stops asking once the next re-check would fall past the horizon', async () => {
      const { sut, db, rows, provider, takesLease, finds, postpones } = setup({
        REVIEW_RECHECK_INTERVAL_MS: '3600000',
        REVIEW_RECHECK_HORIZON_HOURS: '2',
      });
      takesLease();
      finds(inReview({ updatedAt: new Date(Date.now() - 90 * 60_000) }));
      provider.getCharge = jest.fn().mockResolvedValue({ kind: 'found', charge: pendingCharge });
      postpones();

      expect(await sut.reconcile(PAYMENT_SIDE, PAY_1)).toBe('postponed');

      expect(rows.postponeUnderLease).toHaveBeenCalledWith(db, PAYMENTS, expect.anything(), PAY_1, { delayMs: 'never', countAttempt: false });
    });
  });

  describe('reconcile and reconcileBatch, for a refund (REFUND_SIDE)', () => {
    const RE_1 = { clientId: 'client_1', id: 're_1' };
    const providerRefund = { id: 'rf_1', status: 'succeeded', amount: 200, charge: 'ch_1', failure_code: null } as const;

    it('presents the refund once, under its own key and lease, and records the answer on the refund', async () => {
      const { sut, db, keys, rows, provider, config, takesLease, finds, recordsOutcome } = setup();
      const leaseTaken = takesLease();
      const refund = aRefund();
      finds(refund);
      provider.createRefund = jest.fn().mockResolvedValue({ kind: 'answered', refund: providerRefund });
      recordsOutcome();

      expect(await sut.reconcile(REFUND_SIDE, RE_1)).toBe('settled');

      expect(keys.takeOverLeaseFor).toHaveBeenCalledWith(db, REFUNDS, RE_1, expect.any(String), config.idempotency.leaseMs);
      expect(rows.findForClient).toHaveBeenCalledWith(db, REFUNDS, RE_1);
      expect(provider.createRefund).toHaveBeenCalledTimes(1);
      expect(provider.createRefund).toHaveBeenCalledWith(
        { providerKey: 'rk_re_1', charge: 'ch_1', amount: 200, reference: 're_1' },
        { clientId: 'client_1', maxAttempts: 1, deadlineMs: config.provider.deadlineMs },
      );
      expect(rows.recordOutcomeUnderLease).toHaveBeenCalledWith(
        db,
        REFUNDS,
        leaseTaken(),
        refund,
        expect.objectContaining({
          outcome: { status: 'succeeded', providerId: 'rf_1' },
          answer: expect.objectContaining({ status: 201 }),
          change: expect.objectContaining({ type: 'refund.succeeded' }),
        }),
      );
      // provider.createCharge is not stubbed: a refund never presents a charge.
    });

    it('postpones a refund on the same ladder when the provider holds it as pending', async () => {
      const { sut, db, rows, provider, takesLease, finds, postpones } = setup();
      const leaseTaken = takesLease();
      finds(aRefund({ reconcileAttempts: 2 }));
      provider.createRefund = jest.fn().mockResolvedValue({ kind: 'answered', refund: { ...providerRefund, status: 'pending' } });
      postpones();

      expect(await sut.reconcile(REFUND_SIDE, RE_1)).toBe('postponed');

      expect(rows.postponeUnderLease).toHaveBeenCalledWith(db, REFUNDS, leaseTaken(), RE_1, {
        delayMs: expect.any(Number),
        countAttempt: true,
      });
    });

    it('only looks a refund in review up, and settles it on a final answer', async () => {
      const { sut, db, rows, provider, takesLease, finds, recordsOutcome } = setup();
      takesLease();
      finds(aRefund({ status: 'requires_review', failureCode: 'reconciliation_exhausted', updatedAt: new Date(Date.now() - 60_000) }));
      const declined = { ...providerRefund, status: 'failed', failure_code: 'expired_card' };
      provider.getRefund = jest.fn().mockResolvedValue({ kind: 'found', refund: declined });
      recordsOutcome();

      expect(await sut.reconcile(REFUND_SIDE, RE_1)).toBe('settled');

      expect(provider.getRefund).toHaveBeenCalledWith('rk_re_1', expect.objectContaining({ clientId: 'client_1', maxAttempts: 1 }));
      expect(rows.recordOutcomeUnderLease).toHaveBeenCalledWith(
        db,
        REFUNDS,
        expect.anything(),
        expect.objectContaining(RE_1),
        expect.objectContaining({
          outcome: expect.objectContaining({ status: 'failed', providerId: 'rf_1', failureCode: 'expired_card' }),
          answer: expect.objectContaining({ status: 402 }),
        }),
      );
      // provider.createRefund is not stubbed: a review is never resubmitted.
    });

    it('takes a batch of refunds by their own key column and records their answers together', async () => {
      const { sut, db, keys, rows, provider, dataSource, recordsOutcome } = setup();
      keys.takeOverDueLeases = jest.fn().mockResolvedValue([
        { key: 'key-1', row: aRefund({ id: 're_1' }) },
        { key: 'key-2', row: aRefund({ id: 're_2', providerKey: 'rk_re_2' }) },
      ]);
      provider.createRefund = jest.fn().mockResolvedValue({ kind: 'answered', refund: providerRefund });
      recordsOutcome();
      keys.lockHeldLeases = jest.fn(async (_db, leases) => new Set(leases.map(({ key }: Lease) => key)));

      expect(await sut.reconcileBatch(REFUND_SIDE, 'client_1', ['re_1', 're_2'])).toEqual({ settled: 2 });

      expect(keys.takeOverDueLeases).toHaveBeenCalledWith(db, REFUNDS, 'client_1', ['re_1', 're_2'], expect.any(String), expect.any(Number));
      expect(provider.createRefund.mock.calls.map(([input]) => input.providerKey)).toEqual(['rk_re_1', 'rk_re_2']);
      expect(dataSource.transaction).toHaveBeenCalledTimes(1);
      expect(rows.recordOutcomeUnderLease.mock.calls.map(([, operation, , row]) => [operation, row.id])).toEqual([
        [REFUNDS, 're_1'],
        [REFUNDS, 're_2'],
      ]);
    });
  });

  describe('pruneExpiredKeys', () => {
    const BATCH = 10;
    const backlogOf = async (metrics: Metrics) => (await metrics.expiredKeysBacklog.get()).values[0]?.value;

    afterEach(() => jest.restoreAllMocks());

    it('deletes batch after batch of each client while they come back full, then goes on to the next client', async () => {
      const { sut, db, clients, keys, metrics } = setup({ KEY_PRUNE_BATCH_SIZE: String(BATCH) });
      clients.ids = jest.fn().mockResolvedValue(['client_a', 'client_b']);
      keys.pruneExpired = jest
        .fn()
        .mockResolvedValueOnce(BATCH)
        .mockResolvedValueOnce(BATCH)
        .mockResolvedValueOnce(3)
        .mockResolvedValueOnce(4);

      expect(await sut.pruneExpiredKeys()).toBe(2 * BATCH + 7);

      expect(keys.pruneExpired.mock.calls).toEqual([
        [db, 'client_a', BATCH],
        [db, 'client_a', BATCH],
        [db, 'client_a', BATCH],
        [db, 'client_b', BATCH],
      ]);
      // keys.countExpired is not stubbed: a drained backlog is 0 without counting.
      expect(await backlogOf(metrics)).toBe(0);
    });

    it('asks once per client when nothing has expired', async () => {
      const { sut, clients, keys } = setup({ KEY_PRUNE_BATCH_SIZE: String(BATCH) });
      clients.ids = jest.fn().mockResolvedValue(['client_a', 'client_b']);
      keys.pruneExpired = jest.fn().mockResolvedValue(0);

      expect(await sut.pruneExpiredKeys()).toBe(0);
      expect(keys.pruneExpired).toHaveBeenCalledTimes(2);
    });

    it('goes on past any fixed number of batches while its time budget lasts', async () => {
      const { sut, clients, keys } = setup({ KEY_PRUNE_BATCH_SIZE: String(BATCH) });
      clients.ids = jest.fn().mockResolvedValue(['client_a']);
      let full = 500;
      keys.pruneExpired = jest.fn(async (_db: EntityManager, _clientId: string, _batchSize: number): Promise<number> =>
        full-- > 0 ? BATCH : 0,
      );

      expect(await sut.pruneExpiredKeys()).toBe(500 * BATCH);
      expect(keys.pruneExpired).toHaveBeenCalledTimes(501);
    });

    it('stops once its time budget is spent, counts what is left as the backlog, and starts there next time', async () => {
      const { sut, clients, keys, metrics } = setup({ KEY_PRUNE_BATCH_SIZE: String(BATCH), KEY_PRUNE_RUN_BUDGET_MS: '1000' });
      let now = 0;
      jest.spyOn(Date, 'now').mockImplementation(() => now);
      clients.ids = jest.fn().mockResolvedValue(['client_a', 'client_b', 'client_c']);
      keys.pruneExpired = jest.fn(async (_db: EntityManager, clientId: string, _batchSize: number): Promise<number> => {
        now += 300;
        return clientId === 'client_a' ? 0 : BATCH;
      });
      keys.countExpired = jest.fn(async (_db: EntityManager, clientId: string, _cap: number) =>
        clientId === 'client_b' ? 12_000 : 345,
      );

      expect(await sut.pruneExpiredKeys()).toBe(3 * BATCH);
      expect(await backlogOf(metrics)).toBe(12_345);

      keys.pruneExpired.mockClear();
      await sut.pruneExpiredKeys();
      expect(keys.pruneExpired.mock.calls.map(([, clientId]) => clientId)).toEqual(['client_b', 'client_b', 'client_b', 'client_b']);
    });
  });
});
