import { randomUUID } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import { DataSource, type EntityManager } from 'typeorm';
import type { AppConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import { aroundUpdatedAt } from './around-updated-at';
import { IdempotencyRepository } from './idempotency.repository';
import { type HeldLease, type Lease, type StoredResponse, heldSince } from './lease';
import type { Operation, OperationRow, RowRef } from './operation';
import { type Decision, OperationsRepository } from './operations.repository';
import { type FinalOutcome, decidedAs } from './outcome';
import { changeOf } from './outbox';

/**
 * The only ways a payment or a refund changes after it is created: every
 * method takes the operation (see Operation) and works the same for both.
 * Every writer (the request, the reconciliation worker, a provider event, an
 * operator) goes through here, and every write here is one statement fenced
 * by the lease on the row's idempotency key: it locks the key row if, and
 * only if, the writer's lease token still holds it, and writes nothing
 * otherwise (see heldCte). A writer that stalled past its lease and was
 * taken over finds another token and commits nothing, so two writers can
 * never both decide a row. Every status change commits with its merchant
 * event (the outbox), in the same statement, and the schema refuses a commit
 * that has one without the other.
 *
 * A lease's client is its row's, so every statement here names the client:
 * on a schema sharded by client, each runs on one shard.
 */
@Injectable()
export class Ledger {
  constructor(
    private readonly dataSource: DataSource,
    private readonly keys: IdempotencyRepository,
    private readonly rows: OperationsRepository,
    @InjectConfig() private readonly config: AppConfig,
  ) {}

  /**
   * Moves an undecided row (payment or refund), in one statement and so one commit with its
   * event and what its key keeps:
   *
   * - to succeeded or failed: the key stores the final response, replayed
   *   byte for byte from then on (`response`), and its retention starts;
   * - to requires_review: the key keeps no answer (the row is not final)
   *   and its lease is released, and the first review re-check is scheduled.
   *
   * `row` is the row as the caller read it under this lease (its
   * response and event are rendered from it: see decidedAs). `db`: a
   * provider event's transaction; by default the statement commits alone.
   * Undefined, with nothing written, when the lease was lost.
   */
  async recordOutcome<R extends OperationRow>(
    operation: Operation<R>,
    lease: Lease,
    row: R,
    outcome: FinalOutcome,
    db: EntityManager = this.dataSource.manager,
  ): Promise<Recorded<R> | undefined> {
    const decision = decisionOf(operation, row, outcome, this.config);
    const result = await this.rows.recordOutcomeUnderLease(db, operation, lease, row, decision);
    switch (result.kind) {
      case 'lease_lost':
        return undefined;
      case 'not_undecided':
        // Only a lease holder decides a row, and it completes the key in the
        // same commit: a final row under a live lease means the schema's
        // invariants were bypassed.
        throw notUndecidedUnderLease(operation, row.id);
      case 'recorded':
        return { row: result.row, response: result.response, expiresInMs: result.expiresInMs };
    }
  }

  /**
   * recordOutcome for several rows of one client at once (a reconcile
   * job's batch), in one transaction: first the key rows these leases still
   * hold are locked, in key order (two batches that share payments queue
   * rather than deadlock), then each row is decided by recordOutcome's
   * statement. One commit instead of one per row.
   *
   * A bulkhead: when that transaction fails, nothing of it is kept and each
   * row is recorded again on its own, so one that cannot be written (an
   * answer or a row the schema refuses) fails alone and the others commit.
   * Each result is in its item's place: fulfilled with what recordOutcome
   * gives (undefined, nothing written, when the lease was lost), or rejected
   * with the error that row's own statement met.
   */
  async recordOutcomes<R extends OperationRow>(
    operation: Operation<R>,
    items: { lease: Lease; row: R; outcome: FinalOutcome }[],
  ): Promise<PromiseSettledResult<Recorded<R> | undefined>[]> {
    if (items.length === 0) return [];
    if (items.length > 1) {
      try {
        const recorded = await this.dataSource.transaction(async (db) => {
          const held = await this.keys.lockHeldLeases(
            db,
            items.map(({ lease }) => lease),
          );
          const written: (Recorded<R> | undefined)[] = [];
          for (const { lease, row, outcome } of items) {
            written.push(held.has(lease.key) ? await this.recordOutcome(operation, lease, row, outcome, db) : undefined);
          }
          return written;
        });
        return recorded.map((value) => ({ status: 'fulfilled', value }));
      } catch {
        // Each row alone below: the ones that fail again say why.
      }
    }
    const settled: PromiseSettledResult<Recorded<R> | undefined>[] = [];
    for (const { lease, row, outcome } of items) {
      try {
        settled.push({ status: 'fulfilled', value: await this.recordOutcome(operation, lease, row, outcome) });
      } catch (reason) {
        settled.push({ status: 'rejected', reason });
      }
    }
    return settled;
  }

  /**
   * A provider event's effect, inside the consumer's transaction (the one
   * that records the message as processed), under the same fence as every
   * other writer: the row's lease is taken in this transaction, then the
   * charge's version is moved forward and, when the event carries a final
   * outcome for an undecided row, the outcome is recorded by the same
   * statement as recordOutcome's. Locks are taken key row first, payment or refund row
   * second, as the request and the worker do, so concurrent writers queue and
   * never deadlock.
   *
   * - 'stale': the version is not newer than the last applied; nothing changes;
   * - 'noted': the version moved forward, the row did not (a pending
   *   charge, or a row already final);
   * - 'applied': the row moved to the event's final outcome;
   * - 'busy': a request or the worker holds the lease right now: the caller
   *   rolls back and the event, redelivered, is applied later.
   */
  async applyProviderEvent<R extends OperationRow>(
    db: EntityManager,
    operation: Operation<R>,
    row: R,
    event: { version: number; outcome?: FinalOutcome },
  ): Promise<'stale' | 'noted' | 'applied' | 'busy'> {
    const undecided = row.status === 'pending' || row.status === 'requires_review';
    if (!event.outcome || !undecided) {
      return (await this.rows.advanceProviderVersion(db, operation, row, event.version)) ? 'noted' : 'stale';
    }
    const lease = await this.keys.takeOverLeaseFor(db, operation, row, randomUUID(), this.config.idempotency.leaseMs);
    if (!lease) return 'busy';
    if (!(await this.rows.advanceProviderVersion(db, operation, row, event.version))) {
      await this.keys.release(db, lease);
      return 'stale';
    }
    // Taken in this transaction, the lease cannot have been lost since.
    const recorded = await this.recordOutcome(operation, lease, row, event.outcome, db);
    if (!recorded) throw new Error(`${operation.name} ${row.id}: the lease taken in this transaction did not hold`);
    return 'applied';
  }

  /**
   * No final answer yet: sets when reconciliation looks again (counting the
   * attempt, unless none was made) and releases the lease, in one statement.
   * False, with nothing written, when the lease was lost.
   */
  async postpone(
    operation: Operation<OperationRow>,
    lease: Lease,
    id: string,
    next: { delayMs: number | 'never'; countAttempt: boolean },
  ): Promise<boolean> {
    return this.rows.postponeUnderLease(this.dataSource.manager, operation, lease, rowOf(lease, id), next);
  }

  /**
   * The fence of the provider call. Before a call that may create a charge
   * and can take up to `callMs`: the lease must hold until the call is over,
   * so a holder that stalled past its lease, and was taken over, never charges
   * after someone else decided the payment. A lease known to outlast the call
   * costs nothing (a fresh one always does: the configuration keeps the
   * provider deadline shorter than the lease); otherwise it is renewed with a
   * conditional update. Undefined when the lease was lost: make no call.
   */
  async holdForCall(lease: HeldLease, callMs: number): Promise<HeldLease | undefined> {
    if (performance.now() + callMs < lease.heldUntil) return lease;
    const { leaseMs } = this.config.idempotency;
    const askedAt = performance.now();
    return (await this.keys.renewLease(this.dataSource.manager, lease, leaseMs))
      ? heldSince(lease, askedAt, leaseMs)
      : undefined;
  }

  /** A row as it is now, if the client has it. */
  async find<R extends OperationRow>(operation: Operation<R>, ref: RowRef): Promise<R | undefined> {
    return this.rows.findForClient(this.dataSource.manager, operation, ref);
  }

  /** The row of an unfinished key: undecided, or its key would have been completed with it. */
  async undecided<R extends OperationRow>(operation: Operation<R>, ref: RowRef): Promise<R> {
    const row = await this.rows.findForClient(this.dataSource.manager, operation, ref);
    if (row?.status !== 'pending' && row?.status !== 'requires_review') {
      throw notUndecidedUnderLease(operation, ref.id);
    }
    return row;
  }
}

/**
 * What recordOutcome committed: the row as it now is, and if it is final
 * the response its key stores, with the key's retention left (ms) as
 * Postgres counted it in that statement.
 */
export interface Recorded<R> {
  row: R;
  response?: StoredResponse;
  expiresInMs?: number;
}

/**
 * All that recording `outcome` on `row` writes besides the row's columns,
 * rendered from the row as the statement will leave it (decidedAs): the
 * final response its key stores, if it is final; the event that announces
 * it; for a review, when it is re-checked first.
 */
export function decisionOf<R extends OperationRow>(
  operation: Operation<R>,
  row: R,
  outcome: FinalOutcome,
  config: AppConfig,
): Decision {
  const decided = decidedAs(operation, row, outcome);
  const change = changeOf(operation, decided);
  if (decided.status === 'requires_review') {
    return { outcome, change, recheckInMs: config.reconcile.reviewRecheckIntervalMs };
  }
  let status = 0;
  const body = aroundUpdatedAt((updatedAt) => {
    const response = operation.finalResponse(decided, updatedAt);
    status = response.status;
    return response.body;
  });
  return { outcome, change, answer: { status, body, ttlHours: config.idempotency.keyTtlHours } };
}

/** The row a lease is held for: the lease's client is the row's. */
function rowOf(lease: Lease, id: string): RowRef {
  return { clientId: lease.clientId, id };
}

function notUndecidedUnderLease(operation: Operation<OperationRow>, id: string): Error {
  return new Error(`${operation.name} ${id} has an unfinished key but is already final`);
}
