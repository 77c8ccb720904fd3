import { randomUUID } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import { InjectQueue } from '@nestjs/bullmq';
import { Injectable, Logger } from '@nestjs/common';
import type { Queue } from 'bullmq';
import { DataSource } from 'typeorm';
import type { AppConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import { ClientsRepository } from '../clients/clients.repository';
import { ClientByClientPrune, countBacklog } from '../common/client-by-client-prune';
import { CrashPoint } from '../common/crash-point';
import { errorForLog } from '../common/log-safety';
import { IdempotencyRepository } from '../ledger/idempotency.repository';
import { type HeldLease, type Lease, heldSince } from '../ledger/lease';
import { Ledger, type Recorded } from '../ledger/ledger.service';
import type { OperationName, OperationRow, RowRef } from '../ledger/operation';
import { OperationsRepository } from '../ledger/operations.repository';
import type { FinalOutcome } from '../ledger/outcome';
import { Metrics, type ReconcileOutcome } from '../metrics/metrics';
import { PROVIDER_SIDES, type ProviderSide } from '../operations/provider-side';
import { backoffDelayMs } from '../provider/retry-policy';
import { inSpanUnder } from '../tracing/tracing';
import { ProviderClient } from '../provider/provider.client';
import {
  JobName,
  RECONCILE_JOB_PAYMENTS,
  RECONCILIATION_QUEUE,
  type ReconcileJobData,
} from './reconciliation.constants';

/** What one row's reconciliation came to; each is counted in reconcile_outcomes_total. */
type ReconcileResult = ReconcileOutcome;

/** What one row's step came to: done (written, or nothing to write), or a final outcome still to record. */
type Step = { done: ReconcileResult } | { decide: FinalOutcome };

/**
 * What one step learnt from the provider: a final outcome; nothing final yet
 * (a pending charge, no answer in time); nothing at all because the breaker
 * refused the call, which is not an attempt either; or nothing because the
 * job's lease was lost before it could submit the charge.
 */
type ProviderAnswer =
  | { kind: 'final'; outcome: FinalOutcome }
  | { kind: 'not_final' }
  | { kind: 'circuit_open' }
  | { kind: 'lease_lost' };

const NOT_FINAL = { kind: 'not_final' } as const;
const CIRCUIT_OPEN = { kind: 'circuit_open' } as const;
const LEASE_LOST = { kind: 'lease_lost' } as const;

function answerOf(outcome: FinalOutcome | undefined): ProviderAnswer {
  return outcome ? { kind: 'final', outcome } : NOT_FINAL;
}

/** How often a sweep in a backlog looks whether the workers have taken half of its last batch. */
const SWEEP_POLL_MS = 100;

/**
 * The reconcile jobs of a sweep's batch of one operation: the rows of each
 * client, up to RECONCILE_JOB_PAYMENTS a job. Removed when done, leaving
 * nothing in Redis.
 */
function reconcileJobs(operation: OperationName, due: RowRef[]) {
  const byClient = new Map<string, string[]>();
  for (const { clientId, id } of due) {
    const ids = byClient.get(clientId);
    if (ids) ids.push(id);
    else byClient.set(clientId, [id]);
  }
  const jobs = [];
  for (const [clientId, ids] of byClient) {
    for (let start = 0; start < ids.length; start += RECONCILE_JOB_PAYMENTS) {
      jobs.push({
        name: JobName.Reconcile,
        data: { clientId, operation, ids: ids.slice(start, start + RECONCILE_JOB_PAYMENTS) } satisfies ReconcileJobData,
        opts: { removeOnComplete: true, removeOnFail: true },
      });
    }
  }
  return jobs;
}

/**
 * Finishes payments and refunds whose request never did: the process
 * crashed, the client gave up, or the provider's answer was not final. One
 * ladder for both: every method takes the operation's provider side (see
 * ProviderSide), and the rows' statements are the ones every operation
 * shares. Postgres is the source of truth; Redis only carries the work of
 * the moment, so a sweep after Redis lost every job finds the same rows again.
 */
@Injectable()
export class ReconciliationService {
  private readonly logger = new Logger(ReconciliationService.name);
  private readonly keyPrune: ClientByClientPrune<'keys'>;

  constructor(
    private readonly dataSource: DataSource,
    private readonly clients: ClientsRepository,
    private readonly keys: IdempotencyRepository,
    private readonly rows: OperationsRepository,
    private readonly ledger: Ledger,
    private readonly provider: ProviderClient,
    @InjectQueue(RECONCILIATION_QUEUE) private readonly queue: Queue,
    @InjectConfig() private readonly config: AppConfig,
    private readonly crashPoint: CrashPoint,
    private readonly metrics: Metrics,
  ) {
    const { batchSize } = config.keyPrune;
    this.keyPrune = new ClientByClientPrune(
      { keys: (clientId) => this.keys.pruneExpired(this.dataSource.manager, clientId, batchSize) },
      batchSize,
    );
  }

  /**
   * Keeps the workers fed: queues the due payments, RECONCILE_BATCH_SIZE at
   * most, in jobs of up to RECONCILE_JOB_PAYMENTS payments of one client, and
   * while a batch comes back full (a backlog), queues the next as soon as the
   * workers have taken half of the last, for at most one interval, after
   * which the next sweep goes on. So a backlog drains as fast as the workers
   * reconcile, not at one batch per interval, and no more than a batch ever
   * waits in Redis. A pass never queues again what an earlier pass of the
   * same sweep queued. A payment queued twice all the same (by overlapping
   * sweeps, or a job put back after its worker died) is worked on once: a job
   * takes only payments that are still due and not leased
   * (takeOverDueLeases), so the second job passes over a payment the first
   * has taken, decided or postponed. The sweep looks across clients (on a
   * sharded schema, across shards); each job carries its payments' client,
   * so the job's own statements each name it.
   *
   * Payments first, then refunds, each operation with the whole budget
   * left of the interval. Returns how many rows it found due, each counted once.
   */
  async sweep(stop: AbortSignal): Promise<number> {
    const deadline = Date.now() + this.config.reconcile.intervalMs;
    let found = 0;
    for (const side of Object.values(PROVIDER_SIDES)) found += await this.sweepOf(side, deadline, stop);
    return found;
  }

  private async sweepOf(side: ProviderSide<OperationRow>, deadline: number, stop: AbortSignal): Promise<number> {
    const { staleAfterMs, batchSize } = this.config.reconcile;
    const { operation } = side;
    const found = new Set<string>();
    for (;;) {
      const due = await this.rows.findDueForReconciliation(this.dataSource.manager, operation, staleAfterMs, batchSize, [
        ...found,
      ]);
      if (due.length > 0) await this.queue.addBulk(reconcileJobs(operation.name, due));
      for (const { id } of due) found.add(id);
      const lowWater = Math.ceil(batchSize / 2 / RECONCILE_JOB_PAYMENTS);
      if (due.length < batchSize || !(await this.waitForRoom(lowWater, deadline, stop))) return found.size;
    }
  }

  /**
   * Polls until at most `lowWater` reconcile jobs wait: true then, false once
   * the deadline passes or the worker is stopping (its close waits for this job).
   */
  private async waitForRoom(lowWater: number, deadline: number, stop: AbortSignal): Promise<boolean> {
    while (!stop.aborted && Date.now() < deadline) {
      await delay(SWEEP_POLL_MS);
      if ((await this.queue.getWaitingCount()) <= lowWater) return true;
    }
    return false;
  }

  /**
   * One reconciliation attempt for one payment, under the same lease a
   * request would hold: while it runs, a retry of the POST gets 409, and no
   * other worker touches the payment. One provider call per step, no
   * in-call retries: the ladder below is this hop's only retry layer.
   */
  async reconcile<R extends OperationRow>(side: ProviderSide<R>, ref: RowRef): Promise<ReconcileResult> {
    const result = await this.reconcileOne(side, ref);
    this.metrics.reconcileOutcomes.inc({ outcome: result });
    return result;
  }

  private async reconcileOne<R extends OperationRow>(side: ProviderSide<R>, ref: RowRef): Promise<ReconcileResult> {
    const db = this.dataSource.manager;
    const { leaseMs } = this.config.idempotency;
    const askedAt = performance.now();
    const taken = await this.keys.takeOverLeaseFor(db, side.operation, ref, randomUUID(), leaseMs);
    if (!taken) return 'skipped';
    const lease = heldSince(taken, askedAt, leaseMs);
    const row = await this.ledger.undecided(side.operation, ref);
    const step = await this.tracedStep(side, lease, row);
    if ('done' in step) return step.done;
    const [recorded] = await this.ledger.recordOutcomes(side.operation, [{ lease, row, outcome: step.decide }]);
    return this.reconciled(side, lease, row, step.decide, recorded);
  }

  /**
   * One reconciliation attempt for each of a job's payments (one client's),
   * as `reconcile` makes it, with the work that does not depend on the
   * payment paid once: one statement takes the leases of those still due and
   * reads them (takeOverDueLeases, one token for all), the provider is asked
   * about each in turn, and the final answers are recorded together in one
   * transaction (Ledger.recordOutcomes), or each alone if that fails, so a
   * payment whose answer cannot be written holds back no other. What is not
   * final is written at once, payment by payment, as `reconcile` does. A
   * payment not taken (decided, leased or postponed since its sweep) is skipped.
   *
   * Returns how many payments came to each result.
   */
  async reconcileBatch<R extends OperationRow>(
    side: ProviderSide<R>,
    clientId: string,
    ids: string[],
  ): Promise<Partial<Record<ReconcileResult, number>>> {
    const { leaseMs } = this.config.idempotency;
    const token = randomUUID();
    const askedAt = performance.now();
    const taken = await this.keys.takeOverDueLeases(this.dataSource.manager, side.operation, clientId, ids, token, leaseMs);
    const results: ReconcileResult[] = Array<ReconcileResult>(ids.length - taken.length).fill('skipped');
    const decided: { lease: HeldLease; row: R; outcome: FinalOutcome }[] = [];
    for (const { key, row } of taken) {
      const lease = heldSince({ clientId, key, token }, askedAt, leaseMs);
      const step = await this.tracedStep(side, lease, row);
      if ('done' in step) results.push(step.done);
      else decided.push({ lease, row, outcome: step.decide });
    }
    const recorded = await this.ledger.recordOutcomes(side.operation, decided);
    for (const [index, { lease, row, outcome }] of decided.entries()) {
      results.push(await this.reconciled(side, lease, row, outcome, recorded[index]));
    }
    const counts: Partial<Record<ReconcileResult, number>> = {};
    for (const result of results) counts[result] = (counts[result] ?? 0) + 1;
    for (const [outcome, count] of Object.entries(counts)) this.metrics.reconcileOutcomes.inc({ outcome }, count);
    return counts;
  }

  /**
   * `step` in a span that is a child of the request that created the row
   * (its stored traceparent), so the provider call it makes, and the row's
   * whole story, stay in that one trace. Without traces, just `step`.
   */
  private tracedStep<R extends OperationRow>(side: ProviderSide<R>, lease: HeldLease, row: R): Promise<Step> {
    const name = side.operation.name;
    return inSpanUnder(`reconcile ${name}`, row.traceParent, { [`payments.${name}_id`]: row.id }, () =>
      this.step(side, lease, row),
    );
  }

  /**
   * A payment under the job's lease: a review is re-checked, anything else is
   * presented to the provider once. All but a final answer is written here;
   * a final answer is returned, to be recorded by the caller.
   */
  private async step<R extends OperationRow>(side: ProviderSide<R>, lease: HeldLease, row: R): Promise<Step> {
    if (row.status === 'requires_review') return { done: await this.recheckReview(side, lease, row) };
    const answer = await this.askProvider(side, row, lease);
    this.crashPoint.reach('worker_mid_job', { [`${side.operation.name}Id`]: row.id });
    switch (answer.kind) {
      case 'lease_lost':
        return { done: 'skipped' };
      case 'circuit_open':
        return { done: await this.deferWhileProviderDown(side, lease, row) };
      case 'not_final':
        return { done: await this.postpone(side, lease, row) };
      case 'final':
        return { decide: answer.outcome };
    }
  }

  /**
   * What recording a final answer came to: undefined when the lease was
   * lost, and nothing was written. An answer whose write failed for this
   * payment is no answer: the attempt counts, the payment climbs the ladder
   * like any unknown outcome and so reaches review if it never can be written.
   */
  private async reconciled<R extends OperationRow>(
    side: ProviderSide<R>,
    lease: Lease,
    row: R,
    outcome: FinalOutcome,
    recorded: PromiseSettledResult<Recorded<R> | undefined>,
  ): Promise<ReconcileResult> {
    const name = side.operation.name;
    if (recorded.status === 'rejected') {
      this.logger.error({ msg: 'provider answer could not be recorded', [`${name}Id`]: row.id, err: errorForLog(recorded.reason) });
      return this.postpone(side, lease, row);
    }
    if (!recorded.value) return 'skipped';
    this.logger.log({ msg: `${name} reconciled`, [`${name}Id`]: row.id, status: outcome.status });
    return outcome.status === 'requires_review' ? 'requires_review' : 'settled';
  }

  /**
   * Deletes expired keys client by client, batch after batch while the
   * batches come back full, within the run's time budget (see
   * ClientByClientPrune). A run that stops on its budget counts what is left
   * for the clients it did not finish, as the backlog metric; one that
   * emptied every backlog says 0 without counting.
   */
  async pruneExpiredKeys(): Promise<number> {
    const db = this.dataSource.manager;
    const run = await this.keyPrune.run(await this.clients.ids(), this.config.keyPrune.runBudgetMs);
    const pruned = run.pruned.keys;
    const backlog = await countBacklog(run.unfinished, (clientId, cap) => this.keys.countExpired(db, clientId, cap));
    this.metrics.expiredKeysBacklog.set(backlog);
    this.metrics.prunedKeys.inc(pruned);
    if (pruned > 0 || backlog > 0) this.logger.log({ msg: 'expired idempotency keys pruned', pruned, backlog });
    return pruned;
  }

  /**
   * Presents the charge to the provider under the payment's provider key, in
   * one call: the provider's POST is idempotent per key, so for a charge it
   * already holds it answers with that charge as it now is (what a lookup
   * would say), and for one it never received it makes it now. This can never
   * make a second charge, and it goes only while the job's lease holds
   * (Ledger.holdForCall), so a worker that stalled past it never charges a
   * payment someone else has decided. A payment in review is only looked up
   * (recheckReview), never submitted.
   */
  private async askProvider<R extends OperationRow>(side: ProviderSide<R>, row: R, lease: HeldLease): Promise<ProviderAnswer> {
    // The call's deadline is shorter than the lease (the configuration sees to
    // it), so a fresh lease holds through the call without a statement.
    const { deadlineMs } = this.config.provider;
    if (!(await this.ledger.holdForCall(lease, deadlineMs))) return LEASE_LOST;
    const submitted = await side.submit(this.provider, row, { clientId: row.clientId, maxAttempts: 1, deadlineMs });
    if (submitted.kind === 'answered') return answerOf(submitted.outcome);
    return submitted.gaveUp === 'breaker_open' ? CIRCUIT_OPEN : NOT_FINAL;
  }

  /**
   * A payment in review: ask the provider again, by lookup only (a review is
   * left on a definitive answer, never by submitting a charge). A final charge
   * decides it, once; anything else waits for the next re-check, every
   * REVIEW_RECHECK_INTERVAL_MS until REVIEW_RECHECK_HORIZON_HOURS after the
   * payment went to review, and then only for an operator.
   */
  private async recheckReview<R extends OperationRow>(side: ProviderSide<R>, lease: HeldLease, row: R): Promise<ReconcileResult> {
    const { operation } = side;
    const idField = `${operation.name}Id`;
    const lookup = await side.lookup(this.provider, row, {
      clientId: row.clientId,
      maxAttempts: 1,
      deadlineMs: this.config.provider.deadlineMs,
    });
    if (lookup.kind === 'unknown' && lookup.gaveUp === 'breaker_open') return this.deferWhileProviderDown(side, lease, row);
    const outcome = lookup.kind === 'found' ? lookup.outcome : undefined;
    if (outcome && outcome.status !== 'requires_review') {
      const [recorded] = await this.ledger.recordOutcomes(operation, [{ lease, row, outcome }]);
      if (recorded.status === 'fulfilled') {
        if (!recorded.value) return 'skipped';
        this.logger.log({ msg: 'review settled by the provider', [idField]: row.id, status: outcome.status });
        return 'settled';
      }
      // Left in review for the next re-check, as an answer that is not final is.
      this.logger.error({ msg: 'provider answer could not be recorded', [idField]: row.id, err: errorForLog(recorded.reason) });
    }
    const { reviewRecheckIntervalMs, reviewRecheckHorizonHours } = this.config.reconcile;
    // updated_at is when the row went to review: nothing else writes it until it leaves.
    const reviewEndsAt = row.updatedAt.getTime() + reviewRecheckHorizonHours * 3_600_000;
    const last = Date.now() + reviewRecheckIntervalMs >= reviewEndsAt;
    if (last) this.logger.warn({ msg: 'review re-checks ended; an operator must resolve', [idField]: row.id });
    const delayMs = last ? 'never' : reviewRecheckIntervalMs;
    return (await this.ledger.postpone(operation, lease, row.id, { delayMs, countAttempt: false })) ? 'postponed' : 'skipped';
  }

  /**
   * The provider's circuit is open: no attempt was made, so none is counted
   * towards requires_review; the payment comes back once a probe may go.
   */
  private async deferWhileProviderDown<R extends OperationRow>(side: ProviderSide<R>, lease: Lease, row: R): Promise<ReconcileResult> {
    const delayMs = this.provider.unavailableForMs(row.clientId);
    const deferred = await this.ledger.postpone(side.operation, lease, row.id, { delayMs, countAttempt: false });
    return deferred ? 'postponed' : 'skipped';
  }

  /**
   * No final answer this time: climb one rung of a jittered exponential
   * ladder, or, once the rungs run out, hand the payment to a person.
   */
  private async postpone<R extends OperationRow>(side: ProviderSide<R>, lease: Lease, row: R): Promise<ReconcileResult> {
    const { operation } = side;
    const { maxAttempts, backoffBaseMs, backoffCapMs } = this.config.reconcile;
    const attempt = row.reconcileAttempts + 1;
    if (attempt >= maxAttempts) {
      const recorded = await this.ledger.recordOutcome(operation, lease, row, {
        status: 'requires_review',
        failureCode: 'reconciliation_exhausted',
        failureMessage: `The provider gave no final answer after ${attempt} reconciliation attempts.`,
      });
      if (recorded) this.logger.warn({ msg: `${operation.name} requires review`, [`${operation.name}Id`]: row.id, attempts: attempt });
      return recorded ? 'requires_review' : 'skipped';
    }
    const delayMs = backoffDelayMs(
      { variant: 'equal', baseMs: backoffBaseMs, capMs: backoffCapMs },
      row.reconcileAttempts,
    );
    const postponed = await this.ledger.postpone(operation, lease, row.id, { delayMs: Math.round(delayMs), countAttempt: true });
    return postponed ? 'postponed' : 'skipped';
  }
}
