import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { type Params, limitLiteral, queryRow, queryRows } from '../database/sql';
import type { JsonAroundUpdatedAt } from './around-updated-at';
import type { IdempotencyKeyRecord } from './idempotency-keys.table';
import type { Lease, StoredResponse } from './lease';
import type { Operation, OperationRow, RowRef } from './operation';

export interface KeyState {
  fingerprint: string;
  /** The id of the row (a payment, a refund) the key was claimed for; a key answered with its write (claimAnswered) names none, and always holds its response. */
  resourceId: string;
  response?: StoredResponse;
  /** Seconds until the current lease expires; 0 when no live lease is held. */
  leaseRemainingSeconds: number;
  /** Past its retention, which only a key holding its final answer has: reusing it is a new request. */
  expired: boolean;
  /** Milliseconds of retention left by Postgres' clock; null until the key holds its final answer. */
  expiresInMs: number | null;
}

type KeyRow = Pick<IdempotencyKeyRecord, 'fingerprint' | 'responseStatus' | 'responseBody'> & {
  resourceId: string;
  leaseRemainingSeconds: number;
  expired: boolean;
  expiresInMs: number | null;
};

/** A new request's claim of its key, for the row (a payment, a refund) it is about to create. */
export interface KeyClaim {
  /** Its client is the row's. */
  lease: Lease;
  fingerprint: string;
  leaseMs: number;
  /**
   * Also take over a key past its retention (a new request under an old
   * key). Without it the claim takes only a key nobody has, and leaves a
   * key that exists alone: not even locked.
   */
  orExpired: boolean;
}

/** A lease as parameters of one statement: the fragments that check or release it name these. */
export interface LeaseParams {
  client: string;
  key: string;
  token: string;
}

export function leaseParams(params: Params, lease: Lease): LeaseParams {
  return { client: params.add(lease.clientId), key: params.add(lease.key), token: params.add(lease.token) };
}

/**
 * The claim of a key for a new row of `operation`, as the `claimed` CTE of
 * the statement that inserts that row (PaymentsRepository and
 * RefundsRepository.insertPendingUnderClaim): key and row are written by one
 * statement, so one commit. `row` names the statement's parameters for the
 * row's id and client (the key's client too). A conflict means someone holds
 * the key, unless it has expired (with its final response stored: nothing
 * else expires) and the claim says `orExpired`: then it is a new request and
 * the old row is taken over in the same statement, for whichever operation
 * it now serves. Without `orExpired` a conflict does nothing (DO UPDATE
 * would lock the existing key row even when its WHERE refuses). Returns
 * the claimed key's row id (as `id`), or no row.
 */
export function claimedCte(
  params: Params,
  claim: KeyClaim,
  operation: Operation<OperationRow>,
  row: { id: string; client: string },
): string {
  const key = params.add(claim.lease.key, 'text');
  const fingerprint = params.add(claim.fingerprint);
  const token = params.add(claim.lease.token);
  const leaseMs = params.add(claim.leaseMs);
  const insert = `INSERT INTO idempotency_keys
         (client_id, key, fingerprint, ${operation.keyColumn}, lease_token, leased_until)
       VALUES (${row.client}, ${key}, ${fingerprint}, ${row.id}, ${token}, now() + ${leaseMs} * interval '1 millisecond')`;
  if (!claim.orExpired) {
    return `claimed AS (
       ${insert}
       ON CONFLICT (client_id, key) DO NOTHING
       RETURNING ${operation.keyColumn} AS id
     )`;
  }
  return `claimed AS (
       ${insert}
       ON CONFLICT (client_id, key) DO UPDATE SET
         fingerprint = EXCLUDED.fingerprint,
         payment_id = EXCLUDED.payment_id,
         refund_id = EXCLUDED.refund_id,
         lease_token = EXCLUDED.lease_token,
         leased_until = EXCLUDED.leased_until,
         response_status = NULL,
         response_body = NULL,
         completed_at = NULL,
         created_at = now(),
         expires_at = NULL
       WHERE idempotency_keys.expires_at <= now()
       RETURNING ${operation.keyColumn} AS id
     )`;
}

/**
 * The fence of every write to a payment or a refund after its creation, as
 * the `held` CTE of the one statement that makes the write (see
 * OperationsRepository.recordOutcomeUnderLease and postponeUnderLease): the
 * key row, locked, if and only if this lease's token still holds it, and
 * every write of the statement hangs off it. A writer that stalled past its
 * lease, and was taken over, finds another token and writes nothing. A lease
 * that expired with no taker still holds: nobody else has acted on the payment.
 *
 * The lock is taken in the statement (no round trip of its own) and before
 * the payment or refund row, the order every writer follows, so writers queue on the
 * key row and never deadlock; it lasts to the statement's commit, so nobody
 * takes the lease over between the check and the writes.
 *
 * Every write of the statement must hang off `held` (directly, or through a
 * CTE that does): Postgres runs a CTE when it is first read, so that is what
 * makes the lock come before any write. A write that did not would let
 * `held` run after this statement had already changed the key row, find no
 * row, and report the lease lost though the writes were made.
 */
export function heldCte(lease: LeaseParams): string {
  return `held AS MATERIALIZED (
       SELECT 1 FROM idempotency_keys
        WHERE client_id = ${lease.client} AND key = ${lease.key} AND lease_token = ${lease.token}
          FOR UPDATE
     )`;
}

/**
 * The final response a key stores, rendered before the statement with the
 * payment's updated_at left open (JsonAroundUpdatedAt), and how long the key
 * keeps it, in hours from the statement's now().
 */
export interface FinalAnswer {
  status: number;
  body: JsonAroundUpdatedAt;
  ttlHours: number;
}

/**
 * What the key keeps once its holder is done, as the `settled` CTE of the
 * statement that does it, written only if the CTE `after` returned a row:
 * the final `answer` if there is one, its body completed with
 * `updatedAtJson` (SQL), its retention counted from now(); the lease released
 * in any case. Without an answer the key stays unfinished, as a payment in
 * review or one whose reconciliation is postponed leaves it. Returns the
 * stored response and the retention left, by Postgres' clock.
 */
export function settledCte(
  params: Params,
  lease: LeaseParams,
  after: string,
  answer: FinalAnswer | undefined,
  updatedAtJson: string,
): string {
  const status = params.add(answer?.status ?? null, 'smallint');
  const before = params.add(answer?.body.before ?? null, 'text');
  const bodyAfter = params.add(answer?.body.after ?? null, 'text');
  const ttlHours = params.add(answer?.ttlHours ?? null, 'float8');
  return `settled AS (
       UPDATE idempotency_keys
          SET response_status = ${status},
              response_body = ${before} || ${updatedAtJson} || ${bodyAfter},
              completed_at = CASE WHEN ${status} IS NULL THEN NULL ELSE now() END,
              expires_at = now() + ${ttlHours} * interval '1 hour',
              lease_token = NULL, leased_until = NULL
        WHERE client_id = ${lease.client} AND key = ${lease.key} AND lease_token = ${lease.token}
          AND EXISTS (SELECT 1 FROM ${after})
        RETURNING response_status AS "responseStatus", response_body AS "responseBody",
                  (extract(epoch FROM expires_at - now()) * 1000)::float8 AS "expiresInMs"
     )`;
}

/**
 * The idempotency_keys table. Every method is one statement; the writes that
 * decide a payment or a refund are single statements of OperationsRepository that use the
 * fragments above. Times come from Postgres
 * (now()), so several API and worker processes agree on when a lease expires.
 *
 * "Expired" has one definition, `expires_at <= now()`, shared by the read, the
 * claim's takeover and the prune. Only the statement that stores the final
 * response sets expires_at (settledCte: NULL until then, and the schema ties
 * it to completed_at), so a key whose payment is not
 * final never expires.
 */
@Injectable()
export class IdempotencyRepository {
  async find(db: EntityManager, clientId: string, key: string): Promise<KeyState | undefined> {
    const row = await queryRow<KeyRow>(
      db,
      `SELECT fingerprint, COALESCE(payment_id, refund_id) AS "resourceId",
              response_status AS "responseStatus", response_body AS "responseBody",
              GREATEST(0, ceil(extract(epoch FROM leased_until - now())))::int AS "leaseRemainingSeconds",
              COALESCE(expires_at <= now(), false) AS expired,
              (extract(epoch FROM expires_at - now()) * 1000)::float8 AS "expiresInMs"
         FROM idempotency_keys
        WHERE client_id = $1 AND key = $2`,
      [clientId, key],
      { planOnce: true },
    );
    if (!row) return undefined;
    const { responseStatus, responseBody, ...state } = row;
    return {
      ...state,
      response: responseStatus === null || responseBody === null ? undefined : { status: responseStatus, body: responseBody },
    };
  }

  /**
   * Claims a key together with its final answer, for a write that calls no
   * provider and names no operation row (a webhook endpoint's creation,
   * update or rotation): in the transaction `db` of the write itself, so the
   * key holds the answer exactly when the write committed. A free key is
   * inserted, an expired one taken over (as claimedCte does); false when the
   * key is live, and then the caller rolls its write back. A concurrent claim
   * of the same key waits here for the first to commit or roll back.
   */
  async claimAnswered(
    db: EntityManager,
    claim: { clientId: string; key: string; fingerprint: string; status: number; body: string; ttlHours: number },
  ): Promise<boolean> {
    const rows = await queryRows(
      db,
      `INSERT INTO idempotency_keys
         (client_id, key, fingerprint, response_status, response_body, completed_at, expires_at)
       VALUES ($1, $2::text, $3, $4, $5, now(), now() + $6 * interval '1 hour')
       ON CONFLICT (client_id, key) DO UPDATE SET
         fingerprint = EXCLUDED.fingerprint,
         payment_id = NULL,
         refund_id = NULL,
         lease_token = NULL,
         leased_until = NULL,
         response_status = EXCLUDED.response_status,
         response_body = EXCLUDED.response_body,
         completed_at = EXCLUDED.completed_at,
         created_at = now(),
         expires_at = EXCLUDED.expires_at
       WHERE idempotency_keys.expires_at <= now()
       RETURNING 1`,
      [claim.clientId, claim.key, claim.fingerprint, claim.status, claim.body, claim.ttlHours],
    );
    return rows.length === 1;
  }

  /**
   * Takes the lease of an unfinished key whose previous lease expired or was
   * released, provided the key is still that of the row the caller read: a
   * key re-claimed since (expired and taken for a new request) is not taken.
   */
  async takeOverLease(
    db: EntityManager,
    lease: Lease,
    operation: Operation<OperationRow>,
    resourceId: string,
    leaseMs: number,
  ): Promise<boolean> {
    const rows = await queryRows(
      db,
      `UPDATE idempotency_keys
          SET lease_token = $3, leased_until = now() + $5 * interval '1 millisecond'
        WHERE client_id = $1 AND key = $2 AND ${operation.keyColumn} = $4 AND completed_at IS NULL
          AND (leased_until IS NULL OR leased_until <= now())
        RETURNING 1`,
      [lease.clientId, lease.key, lease.token, resourceId, leaseMs],
      { planOnce: true },
    );
    return rows.length === 1;
  }

  /**
   * Extends the lease, if this token still holds it on an unfinished key. A
   * lease that expired with no taker is still ours: nobody else has acted.
   */
  async renewLease(db: EntityManager, lease: Lease, leaseMs: number): Promise<boolean> {
    const rows = await queryRows(
      db,
      `UPDATE idempotency_keys
          SET leased_until = now() + $4 * interval '1 millisecond'
        WHERE client_id = $1 AND key = $2 AND lease_token = $3 AND completed_at IS NULL
        RETURNING 1`,
      [lease.clientId, lease.key, lease.token, leaseMs],
      { planOnce: true },
    );
    return rows.length === 1;
  }

  /** The worker's way in: the same lease, found from the row's side. */
  async takeOverLeaseFor(
    db: EntityManager,
    operation: Operation<OperationRow>,
    ref: RowRef,
    token: string,
    leaseMs: number,
  ): Promise<Lease | undefined> {
    const row = await queryRow<Pick<IdempotencyKeyRecord, 'clientId' | 'key'>>(
      db,
      `UPDATE idempotency_keys
          SET lease_token = $3, leased_until = now() + $4 * interval '1 millisecond'
        WHERE client_id = $1 AND ${operation.keyColumn} = $2 AND completed_at IS NULL
          AND (leased_until IS NULL OR leased_until <= now())
        RETURNING client_id AS "clientId", key`,
      [ref.clientId, ref.id, token, leaseMs],
    );
    return row && { ...row, token };
  }

  /**
   * The worker's way in for a batch of one client's payments, in one
   * statement: under one token, takes the lease of each whose key is
   * unfinished and free and whose payment is still due (undecided, its
   * next_reconcile_at passed), and reads those payments. A payment already
   * decided, leased, or postponed by another job since its sweep found it is
   * not taken, so a batch queued twice makes no second attempt.
   *
   * The payments are read in this statement's snapshot, which a change
   * committed while it runs would make stale. Every change to an undecided
   * payment commits with a change to its key row (a takeover, a release, a
   * completion), so a key row whose version (xmin) is no longer the one the
   * statement read, because such a change committed meanwhile, is not taken:
   * for every key it takes, the payment it returns is current.
   */
  async takeOverDueLeases<R extends OperationRow>(
    db: EntityManager,
    operation: Operation<R>,
    clientId: string,
    ids: string[],
    token: string,
    leaseMs: number,
  ): Promise<{ key: string; row: R }[]> {
    const { table, keyColumn } = operation;
    const rows = await queryRows<R & { leaseKey: string }>(
      db,
      `WITH seen AS (
         SELECT k.key, k.xmin AS version
           FROM idempotency_keys k
           JOIN ${table.name} p ON p.client_id = k.client_id AND p.id = k.${keyColumn}
          WHERE k.client_id = $1 AND k.${keyColumn} = ANY($2::text[])
            AND k.completed_at IS NULL AND (k.leased_until IS NULL OR k.leased_until <= now())
            AND p.status IN ('pending', 'requires_review') AND p.next_reconcile_at <= now()
       ), taken AS (
         UPDATE idempotency_keys k
            SET lease_token = $3, leased_until = now() + $4 * interval '1 millisecond'
           FROM seen
          WHERE k.client_id = $1 AND k.key = seen.key AND k.xmin = seen.version
            AND k.completed_at IS NULL AND (k.leased_until IS NULL OR k.leased_until <= now())
         RETURNING k.key AS leased_key, k.${keyColumn} AS leased_id
       )
       SELECT taken.leased_key AS "leaseKey", ${table.selectList}
         FROM taken JOIN ${table.name} ON ${table.name}.client_id = $1 AND ${table.name}.id = taken.leased_id
        ORDER BY ${table.name}.id`,
      [clientId, ids, token, leaseMs],
    );
    return rows.map(({ leaseKey, ...row }) => ({ key: leaseKey, row: row as unknown as R }));
  }

  /**
   * The fence of a transaction deciding several payments of one client at
   * once: locks, in key order, the key rows these leases still hold, and
   * returns their keys. A key whose lease was lost is neither locked nor
   * returned, and nothing may be written for it.
   */
  async lockHeldLeases(db: EntityManager, leases: Lease[]): Promise<Set<string>> {
    if (leases.length === 0) return new Set();
    const [{ clientId }] = leases;
    if (leases.some((lease) => lease.clientId !== clientId)) throw new Error('leases of several clients in one fence');
    const rows = await queryRows<{ key: string }>(
      db,
      `SELECT k.key FROM idempotency_keys k
         JOIN unnest($2::text[], $3::uuid[]) AS held(key, token) ON k.key = held.key AND k.lease_token = held.token
        WHERE k.client_id = $1
        ORDER BY k.key
          FOR UPDATE OF k`,
      [clientId, leases.map((lease) => lease.key), leases.map((lease) => lease.token)],
    );
    return new Set(rows.map((row) => row.key));
  }

  /** Lets a retry (or the worker) resume at once, instead of waiting out the lease. */
  async release(db: EntityManager, lease: Lease): Promise<void> {
    await queryRows(
      db,
      `UPDATE idempotency_keys SET lease_token = NULL, leased_until = NULL
        WHERE client_id = $1 AND key = $2 AND lease_token = $3`,
      [lease.clientId, lease.key, lease.token],
      { planOnce: true },
    );
  }

  /**
   * Deletes one batch of one client's expired keys. Only a key holding its
   * final answer expires, so a late retry of an unfinished payment always
   * finds its key. Keys another transaction has locked (a claim taking one
   * over) are skipped.
   *
   * The batch is chosen once, in a materialised CTE: as `key IN (SELECT …
   * LIMIT n)` the planner may run the subquery again for each row it joins,
   * and then deletes more than n (seen: 3 of a batch of 2).
   */
  async pruneExpired(db: EntityManager, clientId: string, batchSize: number): Promise<number> {
    const rows = await queryRows(
      db,
      `WITH batch AS MATERIALIZED (
         SELECT key FROM idempotency_keys
          WHERE client_id = $1 AND expires_at <= now()
          LIMIT ${limitLiteral(batchSize)}
            FOR UPDATE SKIP LOCKED)
       DELETE FROM idempotency_keys k
        USING batch
        WHERE k.client_id = $1 AND k.key = batch.key
        RETURNING 1`,
      [clientId],
    );
    return rows.length;
  }

  /** How many of a client's expired keys wait to be pruned, counted up to `cap` so that a huge backlog costs no more. */
  async countExpired(db: EntityManager, clientId: string, cap: number): Promise<number> {
    const row = await queryRow<{ count: number }>(
      db,
      `SELECT count(*)::int AS count
         FROM (SELECT 1 FROM idempotency_keys WHERE client_id = $1 AND expires_at <= now() LIMIT ${limitLiteral(cap)}) expired`,
      [clientId],
    );
    return row?.count ?? 0;
  }
}
