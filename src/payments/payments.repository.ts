import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { queryRow, queryRows } from '../database/sql';
import { type KeyClaim, claimParams, claimedCte } from '../idempotency/idempotency.repository';
import type { FinalOutcome } from './payment-outcome';
import { type Payment, paymentsTable } from './payments.table';

const PAYMENT = paymentsTable.selectList;

/** What a new payment is made of; the rest comes from the schema's defaults. */
export type NewPayment = Pick<
  Payment,
  'id' | 'clientId' | 'amount' | 'currency' | 'paymentMethod' | 'orderId' | 'description' | 'metadata' | 'providerKey'
>;

/**
 * What names one payment: its client and id. Every statement on one payment
 * names both, so on a schema sharded by client it runs on that client's shard.
 */
export type PaymentRef = Pick<Payment, 'clientId' | 'id'>;

/**
 * The payments table. Every method is one statement; transactions are composed by the callers.
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
    const values = [
      payment.id,
      payment.clientId,
      payment.amount,
      payment.currency,
      payment.paymentMethod,
      payment.orderId,
      payment.description,
      JSON.stringify(payment.metadata),
      payment.providerKey,
    ];
    return queryRow<Payment>(
      db,
      `WITH ${claimedCte(values.length + 1)}
       INSERT INTO payments
         (id, client_id, amount, currency, payment_method, order_id, description, metadata, provider_key)
       SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9 FROM claimed
       RETURNING ${PAYMENT}`,
      [...values, ...claimParams(claim)],
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
   * The conditional transition that makes final states final: a pending
   * payment may move anywhere, a payment in review only to succeeded or
   * failed, and nothing else moves, so no later write can overturn an outcome
   * and a review is left once.
   */
  async transition(db: EntityManager, payment: PaymentRef, outcome: FinalOutcome): Promise<Payment | undefined> {
    const resolution = outcome.status === 'requires_review' ? undefined : outcome.resolution;
    return queryRow<Payment>(
      db,
      `UPDATE payments
          SET status = $2, provider_charge_id = COALESCE($3, provider_charge_id),
              failure_code = $4, failure_message = $5, resolved_by = $6, resolution_reason = $7,
              updated_at = now()
        WHERE id = $1 AND client_id = $8
          AND (status = 'pending' OR (status = 'requires_review' AND $2 IN ('succeeded', 'failed')))
        RETURNING ${PAYMENT}`,
      [
        payment.id,
        outcome.status,
        'providerChargeId' in outcome ? outcome.providerChargeId : null,
        outcome.status === 'succeeded' ? null : outcome.failureCode,
        outcome.status === 'succeeded' ? null : outcome.failureMessage,
        resolution?.by ?? null,
        resolution?.reason ?? null,
        payment.clientId,
      ],
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
   * Sets when an undecided payment is next due for reconciliation ('never':
   * not again), counting the attempt just made unless told otherwise.
   */
  async scheduleReconciliation(
    db: EntityManager,
    payment: PaymentRef,
    { delayMs, countAttempt }: { delayMs: number | 'never'; countAttempt: boolean },
  ): Promise<void> {
    await db.query(
      `UPDATE payments
          SET reconcile_attempts = reconcile_attempts + $4,
              next_reconcile_at = COALESCE(now() + $3 * interval '1 millisecond', 'infinity')
        WHERE id = $1 AND client_id = $2 AND status IN ('pending', 'requires_review')`,
      [payment.id, payment.clientId, delayMs === 'never' ? null : delayMs, countAttempt ? 1 : 0],
    );
  }
}
