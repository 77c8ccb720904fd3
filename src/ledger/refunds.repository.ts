import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { DomainError, ErrorCode } from '../common/domain-error';
import { Params, queryRow, queryRows } from '../database/sql';
import { currentTraceparent } from '../tracing/tracing';
import { type KeyClaim, claimedCte } from './idempotency.repository';
import { REFUNDS } from './operations';
import { PAYMENT_ID_PATTERN } from './payment-id';
import type { Payment } from './payments.table';
import { type Refund, refundsTable } from './refunds.table';

const REFUND = refundsTable.selectList;

/** What a new refund is asked for; its amount is decided under the payment's lock (see insertPendingUnderClaim). */
export interface RefundRequest {
  id: string;
  clientId: string;
  paymentId: string;
  /** Undefined: all that is left to refund. */
  amount: number | undefined;
  reason: Refund['reason'];
  metadata: Record<string, string>;
  providerKey: string;
}

/** The refunds table's own statements: the claim that creates a refund, and the reads. */
@Injectable()
export class RefundsRepository {
  /**
   * Phase 1 of a refund, in one transaction, in the lock order every writer
   * follows (key row, then the payment's row):
   *
   *   1. the key's claim (claimedCte); undefined, with nothing written, when
   *      someone else holds the key;
   *   2. the payment, locked: refused unless it is this client's and
   *      succeeded, and unless the amount asked is at most what is left to
   *      refund (its amount less its refunds not failed, amount_reserved);
   *   3. the reservation (amount_reserved raised by the refund's amount) and
   *      the pending refund, in one statement.
   *
   * A refusal throws, so the transaction rolls back and the key's claim with
   * it: nothing is written. Under the payment's lock, concurrent refunds of
   * one payment queue, each sees what the ones before it reserved, and
   * together they never reserve more than the payment; the schema's
   * payments_refunds_check would refuse it anyway.
   *
   * Anything but a payment id names no payment (and may hold what Postgres
   * text refuses): it is looked up as no id at all and refused as not found
   * after the claim, so that a key already in use still gets its verdict (a
   * replay, a 409, a 422) first.
   */
  async insertPendingUnderClaim(db: EntityManager, refund: RefundRequest, claim: KeyClaim): Promise<Refund | undefined> {
    const paymentId = PAYMENT_ID_PATTERN.test(refund.paymentId) ? refund.paymentId : null;
    return db.transaction(async (tx) => {
      const params = new Params();
      const id = params.add(refund.id);
      const client = params.add(refund.clientId);
      const claimed = await queryRow<{ id: string }>(
        tx,
        `WITH ${claimedCte(params, claim, REFUNDS, { id, client })} SELECT id FROM claimed`,
        params.values,
        { planOnce: true },
      );
      if (!claimed) return undefined;
      const payment = await queryRow<Pick<Payment, 'status' | 'amount' | 'amountReserved' | 'currency' | 'providerChargeId'>>(
        tx,
        `SELECT status, amount, amount_reserved AS "amountReserved", currency, provider_charge_id AS "providerChargeId"
           FROM payments WHERE id = $1::text AND client_id = $2
            FOR UPDATE`,
        [paymentId, refund.clientId],
        { planOnce: true },
      );
      if (!payment) throw paymentNotFound(refund.paymentId);
      if (payment.status !== 'succeeded' || payment.providerChargeId === null) throw paymentNotRefundable(refund.paymentId, payment.status);
      const left = payment.amount - payment.amountReserved;
      const amount = refund.amount ?? left;
      if (amount < 1 || amount > left) throw amountTooLarge(left);
      return queryRow<Refund>(
        tx,
        `WITH reserved AS (
           UPDATE payments SET amount_reserved = amount_reserved + $4
            WHERE id = $3 AND client_id = $2
            RETURNING 1
         )
         INSERT INTO refunds (id, client_id, payment_id, amount, currency, reason, metadata, provider_key, provider_charge_id, trace_parent)
         SELECT $1, $2, $3, $4, $5::text, $6::text, $7::jsonb, $8, $9, $10 FROM reserved
         RETURNING ${REFUND}`,
        [
          refund.id,
          refund.clientId,
          refund.paymentId,
          amount,
          payment.currency,
          refund.reason,
          JSON.stringify(refund.metadata),
          refund.providerKey,
          payment.providerChargeId,
          currentTraceparent(),
        ],
        { planOnce: true },
      );
    });
  }

  /** For an operator, who knows a refund by its id alone. */
  async findById(db: EntityManager, id: string): Promise<Refund | undefined> {
    return queryRow<Refund>(db, `SELECT ${REFUND} FROM refunds WHERE id = $1`, [id]);
  }

  /**
   * One page of a client's refunds (of one payment, if given), newest
   * first, after the cursor refund; one row more than asked tells whether
   * another page follows. `created_at IS NOT NULL` (true of every row)
   * lets the list indexes serve it: they are partial, so that a lookup by id
   * never does.
   */
  async listForClient(
    db: EntityManager,
    clientId: string,
    page: { limit: number; startingAfter?: string; paymentId?: string },
  ): Promise<{ refunds: Refund[]; hasMore: boolean }> {
    const rows = await queryRows<Refund>(
      db,
      `SELECT ${REFUND} FROM refunds
        WHERE client_id = $1 AND created_at IS NOT NULL
          AND ($4::text IS NULL OR payment_id = $4)
          AND ($2::text IS NULL
               OR (created_at, id) < (SELECT created_at, id FROM refunds WHERE id = $2 AND client_id = $1))
        ORDER BY created_at DESC, id DESC
        LIMIT $3`,
      [clientId, page.startingAfter ?? null, page.limit + 1, page.paymentId ?? null],
    );
    return { refunds: rows.slice(0, page.limit), hasMore: rows.length > page.limit };
  }
}

/** Names the id only when it is one: a client's arbitrary text is not echoed back. */
function paymentNotFound(id: string): DomainError {
  const message = PAYMENT_ID_PATTERN.test(id) ? `No payment ${id}.` : 'No such payment.';
  return new DomainError(ErrorCode.NotFound, message, { param: 'payment' });
}

function paymentNotRefundable(id: string, status: Payment['status']): DomainError {
  return new DomainError(
    ErrorCode.PaymentNotRefundable,
    `Payment ${id} is ${status}: only a succeeded payment can be refunded.`,
    { param: 'payment' },
  );
}

function amountTooLarge(left: number): DomainError {
  return new DomainError(
    ErrorCode.AmountTooLarge,
    left === 0 ? 'Nothing is left to refund on this payment.' : `At most ${left} is left to refund on this payment.`,
    { param: 'amount' },
  );
}
