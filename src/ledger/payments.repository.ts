import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { Params, queryRow, queryRows } from '../database/sql';
import { UPDATED_AT_JSON } from './around-updated-at';
import { type FinalAnswer, type KeyClaim, claimedCte, heldCte, leaseParams, settledCte } from './idempotency.repository';
import type { Lease, StoredResponse } from './lease';
import { type PaymentChange, announcedCtes } from './outbox';
import type { FinalOutcome } from './payment-outcome';
import { type Payment, type PaymentRef, paymentsTable } from './payments.table';

const PAYMENT = paymentsTable.selectList;

/** What a new payment is made of; the rest comes from the schema's defaults. */
export type NewPayment = Pick<
  Payment,
  'id' | 'clientId' | 'amount' | 'currency' | 'paymentMethod' | 'orderId' | 'description' | 'metadata' | 'providerKey'
>;

/**
 * The payments table. Every method is one statement. The writes that change a
 * payment after its creation each are one statement too, fenced by the lease
 * on its key (heldCte), so each commits once, with no transaction to open.
 * Two statements do not name a client, and reach every shard: findById (an
 * operator's) and findByProviderKey (a provider event's first lookup), as
 * does the reconciliation sweep, which looks across clients by nature.
 */
@Injectable()
export class PaymentsRepository {
  /**
   * Phase 1 of a request in one statement: the key's claim (see claimedCte)
   * and the pending payment, inserted only if the claim took. Undefined when
   * someone else holds the key. A payment refused by the active-order index
   * fails the whole statement, the claim with it.
   */
  async insertPendingUnderClaim(db: EntityManager, payment: NewPayment, claim: KeyClaim): Promise<Payment | undefined> {
    const params = new Params();
    const id = params.add(payment.id);
    const client = params.add(payment.clientId);
    return queryRow<Payment>(
      db,
      `WITH ${claimedCte(params, claim, { id, client })}
       INSERT INTO payments
         (id, client_id, amount, currency, payment_method, order_id, description, metadata, provider_key)
       SELECT ${id}, ${client}, ${params.add(payment.amount)}, ${params.add(payment.currency)},
              ${params.add(payment.paymentMethod)}, ${params.add(payment.orderId)}, ${params.add(payment.description)},
              ${params.add(JSON.stringify(payment.metadata))}, ${params.add(payment.providerKey)}
         FROM claimed
       RETURNING ${PAYMENT}`,
      params.values,
    );
  }

  /** For an operator, who knows a payment by its id alone. */
  async findById(db: EntityManager, id: string): Promise<Payment | undefined> {
    return queryRow<Payment>(db, `SELECT ${PAYMENT} FROM payments WHERE id = $1`, [id]);
  }

  async findForClient(db: EntityManager, clientId: string, id: string): Promise<Payment | undefined> {
    return queryRow<Payment>(db, `SELECT ${PAYMENT} FROM payments WHERE id = $1 AND client_id = $2`, [id, clientId]);
  }

  /**
   * The payment a provider charge belongs to (its provider key is derived from
   * the payment id, so unique to one payment), as a reference to read again
   * under the client: it never changes, so this needs no transaction.
   */
  async findByProviderKey(db: EntityManager, providerKey: string): Promise<PaymentRef | undefined> {
    return queryRow<PaymentRef>(
      db,
      `SELECT client_id AS "clientId", id FROM payments WHERE provider_key = $1`,
      [providerKey],
    );
  }

  /**
   * Moves the applied provider version forward; false when `version` is not
   * newer than the last one applied: a late or repeated event, to ignore.
   */
  async advanceProviderVersion(db: EntityManager, payment: PaymentRef, version: number): Promise<boolean> {
    const rows = await queryRows(
      db,
      `UPDATE payments SET provider_version = $3 WHERE id = $1 AND client_id = $2 AND provider_version < $3 RETURNING 1`,
      [payment.id, payment.clientId, version],
    );
    return rows.length === 1;
  }

  /**
   * One page of a client's payments, newest first, after the cursor payment.
   * Fetches one row more than asked to tell whether another page follows.
   */
  async listForClient(
    db: EntityManager,
    clientId: string,
    page: { limit: number; startingAfter?: string },
  ): Promise<{ payments: Payment[]; hasMore: boolean }> {
    // The cursor's created_at is compared in SQL: Postgres keeps microseconds,
    // a JS Date only milliseconds, and a rounded cursor would skip payments.
    const rows = await queryRows<Payment>(
      db,
      `SELECT ${PAYMENT} FROM payments
        WHERE client_id = $1
          AND ($2::text IS NULL
               OR (created_at, id) < (SELECT created_at, id FROM payments WHERE id = $2 AND client_id = $1))
        ORDER BY created_at DESC, id DESC
        LIMIT $3`,
      [clientId, page.startingAfter ?? null, page.limit + 1],
    );
    return { payments: rows.slice(0, page.limit), hasMore: rows.length > page.limit };
  }

  /**
   * Payments waiting for review, the longest waiting first (updated_at is
   * when each went to review: nothing else writes it until it leaves), of one
   * client or all, with when the worker re-checks each next: null once its
   * re-checks have ended and only a person can settle it.
   */
  async listInReview(
    db: EntityManager,
    page: { clientId?: string; limit: number },
  ): Promise<(Payment & { nextRecheckAt: Date | null })[]> {
    return queryRows<Payment & { nextRecheckAt: Date | null }>(
      db,
      `SELECT ${PAYMENT},
              CASE WHEN next_reconcile_at = 'infinity' THEN NULL ELSE next_reconcile_at END AS "nextRecheckAt"
         FROM payments
        WHERE status = 'requires_review' AND ($1::uuid IS NULL OR client_id = $1)
        ORDER BY updated_at, id
        LIMIT $2`,
      [page.clientId ?? null, page.limit],
    );
  }

  /**
   * Undecided payments (pending, or in review) that reconciliation should
   * look at now: older than the stale threshold, due on their ladder or their
   * review re-check, and not leased by a live request. Across clients, so on
   * a sharded schema across shards; the work on each payment names its client.
   * Payments in `excluding` (those a sweep has already queued) are passed over.
   */
  async findDueForReconciliation(
    db: EntityManager,
    staleAfterMs: number,
    limit: number,
    excluding: string[] = [],
  ): Promise<PaymentRef[]> {
    return queryRows<PaymentRef>(
      db,
      `SELECT p.client_id AS "clientId", p.id
         FROM payments p
         JOIN idempotency_keys k ON k.client_id = p.client_id AND k.payment_id = p.id
        WHERE p.status IN ('pending', 'requires_review')
          AND p.next_reconcile_at <= now()
          AND p.created_at <= now() - $1 * interval '1 millisecond'
          AND (k.leased_until IS NULL OR k.leased_until <= now())
          AND NOT (p.id = ANY($3::text[]))
        ORDER BY p.next_reconcile_at
        LIMIT $2`,
      [staleAfterMs, limit, excluding],
    );
  }

  /**
   * Records a decision on an undecided payment in one statement, so one
   * commit and one round trip, fenced by the lease (heldCte): if this lease
   * still holds the key,
   *
   * - the conditional transition that makes final states final: a pending
   *   payment may move anywhere, a payment in review only to succeeded or
   *   failed, and nothing else moves, so no later write can overturn an
   *   outcome and a review is left once. A move to review also sets when its
   *   first re-check is due (`recheckInMs`);
   * - if the payment moved: its event and deliveries (announcedCtes), and
   *   the key settled (settledCte): storing the final response for
   *   succeeded or failed, releasing the lease in every case.
   *
   * The response and the event are rendered before the statement from the
   * payment as it will be (decidedAs), and the statement writes its now()
   * into both, as it does into updated_at: they are the bytes the moved row
   * renders to. The row, the key and the outbox commit together or not at all.
   *
   * 'lease_lost': the lease was taken over; 'not_undecided': the lease holds
   * but the payment cannot move so; in both nothing was written.
   */
  async recordOutcomeUnderLease(
    db: EntityManager,
    lease: Lease,
    payment: PaymentRef,
    decision: Decision,
  ): Promise<Decided> {
    const { outcome, answer, change, recheckInMs } = decision;
    const resolution = outcome.status === 'requires_review' ? undefined : outcome.resolution;
    const params = new Params();
    const held = leaseParams(params, lease);
    const status = params.add(outcome.status);
    const row = await queryRow<DecidedRow>(
      db,
      `WITH ${heldCte(held)},
       moved AS (
         UPDATE payments
            SET status = ${status},
                provider_charge_id = COALESCE(${params.add('providerChargeId' in outcome ? outcome.providerChargeId : null)}, provider_charge_id),
                failure_code = ${params.add(outcome.status === 'succeeded' ? null : outcome.failureCode)},
                failure_message = ${params.add(outcome.status === 'succeeded' ? null : outcome.failureMessage)},
                resolved_by = ${params.add(resolution?.by ?? null)},
                resolution_reason = ${params.add(resolution?.reason ?? null)},
                next_reconcile_at = COALESCE(now() + ${params.add(recheckInMs ?? null)} * interval '1 millisecond', next_reconcile_at),
                updated_at = now()
          WHERE id = ${params.add(payment.id)} AND client_id = ${held.client}
            AND (status = 'pending' OR (status = 'requires_review' AND ${status} IN ('succeeded', 'failed')))
            AND EXISTS (SELECT 1 FROM held)
          RETURNING ${PAYMENT}
       ),
       ${settledCte(params, held, 'moved', answer, UPDATED_AT_JSON)},
       ${announcedCtes(params, held.client, change, UPDATED_AT_JSON)}
       SELECT EXISTS (SELECT 1 FROM held) AS "leaseHeld", moved.*,
              settled."responseStatus", settled."responseBody", settled."expiresInMs"
         FROM (SELECT) AS one LEFT JOIN moved ON true LEFT JOIN settled ON true`,
      params.values,
    );
    if (!row?.leaseHeld) return { kind: 'lease_lost' };
    const { leaseHeld: _held, responseStatus, responseBody, expiresInMs, ...moved } = row;
    if (moved.id === null) return { kind: 'not_undecided' };
    const response = responseStatus === null || responseBody === null ? undefined : { status: responseStatus, body: responseBody };
    return { kind: 'recorded', payment: moved as Payment, ...(response && { response, expiresInMs: expiresInMs as number }) };
  }

  /**
   * No decision this time, in one statement fenced by the lease as
   * recordOutcomeUnderLease is: sets when the undecided payment is next due
   * for reconciliation ('never': not again), counting the attempt just made
   * unless told otherwise, and releases the lease. False, with nothing
   * written, when the lease was lost.
   */
  async postponeUnderLease(
    db: EntityManager,
    lease: Lease,
    payment: PaymentRef,
    { delayMs, countAttempt }: { delayMs: number | 'never'; countAttempt: boolean },
  ): Promise<boolean> {
    const params = new Params();
    const held = leaseParams(params, lease);
    const row = await queryRow<{ leaseHeld: boolean }>(
      db,
      `WITH ${heldCte(held)},
       scheduled AS (
         UPDATE payments
            SET reconcile_attempts = reconcile_attempts + ${params.add(countAttempt ? 1 : 0)},
                next_reconcile_at = COALESCE(now() + ${params.add(delayMs === 'never' ? null : delayMs)} * interval '1 millisecond', 'infinity')
          WHERE id = ${params.add(payment.id)} AND client_id = ${held.client} AND status IN ('pending', 'requires_review')
            AND EXISTS (SELECT 1 FROM held)
       ),
       ${settledCte(params, held, 'held', undefined, 'NULL::text')}
       SELECT EXISTS (SELECT 1 FROM held) AS "leaseHeld"`,
      params.values,
    );
    return row?.leaseHeld === true;
  }
}

/** What a decision writes besides the payment's columns, all rendered before the statement (see decidedAs). */
export interface Decision {
  outcome: FinalOutcome;
  /** The final response the key stores (succeeded or failed) and its retention; none for a review. */
  answer?: FinalAnswer;
  /** The event announcing the new status. */
  change: PaymentChange;
  /** For a move to review: when its first re-check is due. */
  recheckInMs?: number;
}

/** What recordOutcomeUnderLease did; only 'recorded' wrote anything. */
export type Decided =
  | { kind: 'lease_lost' }
  | { kind: 'not_undecided' }
  | {
      kind: 'recorded';
      payment: Payment;
      /** The final response the key now stores, with its retention left in ms by Postgres' clock. */
      response?: StoredResponse;
      expiresInMs?: number;
    };

type DecidedRow = { [K in keyof Payment]: Payment[K] | null } & {
  leaseHeld: boolean;
  responseStatus: number | null;
  responseBody: string | null;
  expiresInMs: number | null;
};
