import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { Params, queryRow, queryRows } from '../database/sql';
import { UPDATED_AT_JSON } from './around-updated-at';
import { type FinalAnswer, heldCte, leaseParams, settledCte } from './idempotency.repository';
import type { Lease, StoredResponse } from './lease';
import type { Operation, OperationRow, RowRef } from './operation';
import type { FinalOutcome } from './outcome';
import { type Change, announcedCtes } from './outbox';

/**
 * The statements every operation shares, on the table its descriptor names
 * (see Operation): the fenced outcome and postponement, the provider
 * version, the reconciliation sweep's query and the review list. Every
 * method is one statement; the writes after a row's creation are each fenced
 * by the lease on its key (heldCte), so each commits once, with no
 * transaction to open. Two statements do not name a client, and reach every
 * shard: findByProviderKey (a provider event's first lookup) and the sweep,
 * which looks across clients by nature.
 */
@Injectable()
export class OperationsRepository {
  async findForClient<R extends OperationRow>(
    db: EntityManager,
    operation: Operation<R>,
    ref: RowRef,
  ): Promise<R | undefined> {
    const { table } = operation;
    return queryRow<R>(db, `SELECT ${table.selectList} FROM ${table.name} WHERE id = $1 AND client_id = $2`, [ref.id, ref.clientId], { planOnce: true });
  }

  /**
   * The row a provider object belongs to (its provider key is derived from
   * the row's id, so unique to one row), as a reference to read again under
   * the client: it never changes, so this needs no transaction.
   */
  async findByProviderKey(db: EntityManager, operation: Operation<OperationRow>, providerKey: string): Promise<RowRef | undefined> {
    return queryRow<RowRef>(
      db,
      `SELECT client_id AS "clientId", id FROM ${operation.table.name} WHERE provider_key = $1`,
      [providerKey],
      { planOnce: true },
    );
  }

  /**
   * Moves the applied provider version forward; false when `version` is not
   * newer than the last one applied: a late or repeated event, to ignore.
   */
  async advanceProviderVersion(
    db: EntityManager,
    operation: Operation<OperationRow>,
    ref: RowRef,
    version: number,
  ): Promise<boolean> {
    const rows = await queryRows(
      db,
      `UPDATE ${operation.table.name} SET provider_version = $3::integer
        WHERE id = $1 AND client_id = $2 AND provider_version < $3 RETURNING 1`,
      [ref.id, ref.clientId, version],
      { planOnce: true },
    );
    return rows.length === 1;
  }

  /**
   * Rows waiting for review, the longest waiting first (updated_at is when
   * each went to review: nothing else writes it until it leaves), of one
   * client or all, with when the worker re-checks each next: null once its
   * re-checks have ended and only a person can settle it.
   */
  async listInReview<R extends OperationRow>(
    db: EntityManager,
    operation: Operation<R>,
    page: { clientId?: string; limit: number },
  ): Promise<(R & { nextRecheckAt: Date | null })[]> {
    const { table } = operation;
    return queryRows<R & { nextRecheckAt: Date | null }>(
      db,
      `SELECT ${table.selectList},
              CASE WHEN next_reconcile_at = 'infinity' THEN NULL ELSE next_reconcile_at END AS "nextRecheckAt"
         FROM ${table.name}
        WHERE status = 'requires_review' AND ($1::uuid IS NULL OR client_id = $1)
        ORDER BY updated_at, id
        LIMIT $2`,
      [page.clientId ?? null, page.limit],
    );
  }

  /**
   * Undecided rows (pending, or in review) that reconciliation should look
   * at now: older than the stale threshold, due on their ladder or their
   * review re-check, and not leased by a live request. Across clients, so on
   * a sharded schema across shards; the work on each row names its client.
   * Rows in `excluding` (those a sweep has already queued) are passed over.
   */
  async findDueForReconciliation(
    db: EntityManager,
    operation: Operation<OperationRow>,
    staleAfterMs: number,
    limit: number,
    excluding: string[] = [],
  ): Promise<RowRef[]> {
    return queryRows<RowRef>(
      db,
      `SELECT r.client_id AS "clientId", r.id
         FROM ${operation.table.name} r
         JOIN idempotency_keys k ON k.client_id = r.client_id AND k.${operation.keyColumn} = r.id
        WHERE r.status IN ('pending', 'requires_review')
          AND r.next_reconcile_at <= now()
          AND r.created_at <= now() - $1 * interval '1 millisecond'
          AND (k.leased_until IS NULL OR k.leased_until <= now())
          AND NOT (r.id = ANY($3::text[]))
        ORDER BY r.next_reconcile_at
        LIMIT $2`,
      [staleAfterMs, limit, excluding],
    );
  }

  /**
   * Records a decision on an undecided row in one statement, so one commit
   * and one round trip, fenced by the lease (heldCte): if this lease still
   * holds the key,
   *
   * - the conditional transition that makes final states final: a pending
   *   row may move anywhere, a row in review only to succeeded or failed,
   *   and nothing else moves, so no later write can overturn an outcome and
   *   a review is left once. A move to review also sets when its first
   *   re-check is due (`recheckInMs`);
   * - if the row moved: what else the operation writes with it (its
   *   movedEffects), its event and deliveries (announcedCtes), and the key
   *   settled (settledCte): storing the final response for succeeded or
   *   failed, releasing the lease in every case.
   *
   * The response and the event are rendered before the statement from the
   * row as it will be (decidedAs), and the statement writes its now() into
   * both, as it does into updated_at: they are the bytes the moved row
   * renders to. All of it commits together or not at all.
   *
   * 'lease_lost': the lease was taken over; 'not_undecided': the lease holds
   * but the row cannot move so; in both nothing was written.
   */
  async recordOutcomeUnderLease<R extends OperationRow>(
    db: EntityManager,
    operation: Operation<R>,
    lease: Lease,
    ref: RowRef,
    decision: Decision,
  ): Promise<Decided<R>> {
    const { outcome, answer, change, recheckInMs } = decision;
    const resolution = outcome.status === 'requires_review' ? undefined : outcome.resolution;
    const { table, providerIdColumn } = operation;
    const params = new Params();
    const held = leaseParams(params, lease);
    const status = params.add(outcome.status);
    const row = await queryRow<DecidedRow<R>>(
      db,
      `WITH ${heldCte(held)},
       moved AS (
         UPDATE ${table.name}
            SET status = ${status},
                ${providerIdColumn} = COALESCE(${params.add('providerId' in outcome ? outcome.providerId : null, 'text')}, ${providerIdColumn}),
                failure_code = ${params.add(outcome.status === 'succeeded' ? null : outcome.failureCode, 'text')},
                failure_message = ${params.add(outcome.status === 'succeeded' ? null : outcome.failureMessage)},
                resolved_by = ${params.add(resolution?.by ?? null)},
                resolution_reason = ${params.add(resolution?.reason ?? null)},
                next_reconcile_at = COALESCE(now() + ${params.add(recheckInMs ?? null)} * interval '1 millisecond', next_reconcile_at),
                updated_at = now()
          WHERE id = ${params.add(ref.id)} AND client_id = ${held.client}
            AND (status = 'pending' OR (status = 'requires_review' AND ${status} IN ('succeeded', 'failed')))
            AND EXISTS (SELECT 1 FROM held)
          RETURNING ${table.selectList}
       ),
       ${[...operation.movedEffects(held.client), settledCte(params, held, 'moved', answer, UPDATED_AT_JSON)].join(',\n')},
       ${announcedCtes(params, operation, held.client, change, UPDATED_AT_JSON)}
       SELECT EXISTS (SELECT 1 FROM held) AS "leaseHeld", moved.*,
              settled."responseStatus", settled."responseBody", settled."expiresInMs"
         FROM (SELECT) AS one LEFT JOIN moved ON true LEFT JOIN settled ON true`,
      params.values,
      { planOnce: true },
    );
    if (!row?.leaseHeld) return { kind: 'lease_lost' };
    const { leaseHeld: _held, responseStatus, responseBody, expiresInMs, ...moved } = row;
    if (moved.id === null) return { kind: 'not_undecided' };
    const response = responseStatus === null || responseBody === null ? undefined : { status: responseStatus, body: responseBody };
    return { kind: 'recorded', row: moved as unknown as R, ...(response && { response, expiresInMs: expiresInMs as number }) };
  }

  /**
   * No decision this time, in one statement fenced by the lease as
   * recordOutcomeUnderLease is: sets when the undecided row is next due for
   * reconciliation ('never': not again), counting the attempt just made
   * unless told otherwise, and releases the lease. False, with nothing
   * written, when the lease was lost.
   */
  async postponeUnderLease(
    db: EntityManager,
    operation: Operation<OperationRow>,
    lease: Lease,
    ref: RowRef,
    { delayMs, countAttempt }: { delayMs: number | 'never'; countAttempt: boolean },
  ): Promise<boolean> {
    const params = new Params();
    const held = leaseParams(params, lease);
    const row = await queryRow<{ leaseHeld: boolean }>(
      db,
      `WITH ${heldCte(held)},
       scheduled AS (
         UPDATE ${operation.table.name}
            SET reconcile_attempts = reconcile_attempts + ${params.add(countAttempt ? 1 : 0)},
                next_reconcile_at = COALESCE(now() + ${params.add(delayMs === 'never' ? null : delayMs)} * interval '1 millisecond', 'infinity')
          WHERE id = ${params.add(ref.id)} AND client_id = ${held.client} AND status IN ('pending', 'requires_review')
            AND EXISTS (SELECT 1 FROM held)
       ),
       ${settledCte(params, held, 'held', undefined, 'NULL::text')}
       SELECT EXISTS (SELECT 1 FROM held) AS "leaseHeld"`,
      params.values,
      { planOnce: true },
    );
    return row?.leaseHeld === true;
  }
}

/** What a decision writes besides the row's columns, all rendered before the statement (see decidedAs). */
export interface Decision {
  outcome: FinalOutcome;
  /** The final response the key stores (succeeded or failed) and its retention; none for a review. */
  answer?: FinalAnswer;
  /** The event announcing the new status. */
  change: Change;
  /** For a move to review: when its first re-check is due. */
  recheckInMs?: number;
}

/** What recordOutcomeUnderLease did; only 'recorded' wrote anything. */
export type Decided<R> =
  | { kind: 'lease_lost' }
  | { kind: 'not_undecided' }
  | {
      kind: 'recorded';
      row: R;
      /** The final response the key now stores, with its retention left in ms by Postgres' clock. */
      response?: StoredResponse;
      expiresInMs?: number;
    };

type DecidedRow<R> = { [K in keyof R]: R[K] | null } & {
  leaseHeld: boolean;
  responseStatus: number | null;
  responseBody: string | null;
  expiresInMs: number | null;
};
