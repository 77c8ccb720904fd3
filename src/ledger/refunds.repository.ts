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
   * Phase 1 of a refund: one statement in a transaction, in the lock order
   * every writer follows (key row, then the payment's row):
   *
   *   1. the key's claim (claimedCte); undefined, with nothing written, when
   *      someone else holds the key;
   *   2. the payment, locked (`payment`), and what this refund takes of it:
   *      the amount asked, or all that is left (its amount less its refunds
   *      not failed, amount_reserved);
   *   3. the reservation (amount_reserved raised by that much) if the payment
   *      is this client's, succeeded and charged, and the amount is between
   *      1 and what is left; and the pending refund, inserted only if the
   *      reservation was made.
   *
   * A refusal (claimed, nothing inserted) throws, naming why from the locked
   * payment, so the transaction rolls back and the key's claim with it:
   * nothing is written. The lock is taken on the payment's newest version
   * (FOR UPDATE waits for a concurrent refund of it, then reads what that
   * one reserved), so concurrent refunds of one payment queue, each sees
   * what the ones before it reserved, and together they never reserve more
   * than the payment; the schema's payments_refunds_check would refuse it
   * anyway.
   *
   * The reservation writes, from the locked row, every column a check of
   * payments reads with amount_reserved: amount_reserved (the locked row's
   * plus the refund) and status (the locked row's, unchanged). The UPDATE
   * reads payments as the statement's snapshot saw them, which may be older
   * than the row the lock waited for; Postgres builds the new row from that
   * old one, with this statement's assignments, and checks the table's
   * constraints on it before it finds the row changed and redoes the update
   * on the newest (READ COMMITTED's recheck). Taken from the old row, either
   * column broke a check when the payment changed while this statement
   * waited: a failed refund giving its amount back (the old reservation
   * plus all that is left now: payments_refunds_check, a 500 the chaos run
   * found), or the payment's own move to succeeded (a reservation on a row
   * still pending: payments_refundable_check). The other columns the checks
   * read hold for the old row as they do for the new (amount never changes,
   * amount_refunded only rises, the resolution's pair is set together).
   *
   * Anything but a payment id names no payment (and may hold what Postgres
   * text refuses): it is looked up as no id at all and refused as not found
   * after the claim, so that a key already in use still gets its verdict (a
   * replay, a 409, a 422) first.
   */
  async insertPendingUnderClaim(db: EntityManager, refund: RefundRequest, claim: KeyClaim): Promise<Refund | undefined> {
    return db.transaction(async (tx) => {
      const params = new Params();
      const id = params.add(refund.id);
      const client = params.add(refund.clientId);
      const paymentId = params.add(PAYMENT_ID_PATTERN.test(refund.paymentId) ? refund.paymentId : null, 'text');
      const asked = params.add(refund.amount ?? null, 'integer');
      const row = await queryRow<ClaimedRefund>(
        tx,
        `WITH ${claimedCte(params, claim, REFUNDS, { id, client })},
         payment AS MATERIALIZED (
           SELECT status, amount_reserved AS reserved, amount - amount_reserved AS "left", provider_charge_id, currency,
                  COALESCE(${asked}, amount - amount_reserved) AS refunding
             FROM payments
            WHERE id = ${paymentId} AND client_id = ${client} AND EXISTS (SELECT 1 FROM claimed)
              FOR UPDATE
         ),
         reserved AS (
           UPDATE payments SET amount_reserved = payment.reserved + payment.refunding, status = payment.status
             FROM payment
            WHERE payments.id = ${paymentId} AND payments.client_id = ${client}
              AND payment.status = 'succeeded' AND payment.provider_charge_id IS NOT NULL
              AND payment.refunding BETWEEN 1 AND payment."left"
           RETURNING payment.refunding, payment.currency, payment.provider_charge_id
         ),
         inserted AS (
           INSERT INTO refunds (id, client_id, payment_id, amount, currency, reason, metadata, provider_key, provider_charge_id, trace_parent)
           SELECT ${id}, ${client}, ${paymentId}, refunding, currency, ${params.add(refund.reason, 'text')},
                  ${params.add(JSON.stringify(refund.metadata), 'jsonb')}, ${params.add(refund.providerKey)}, provider_charge_id,
                  ${params.add(currentTraceparent())}
             FROM reserved
           RETURNING ${REFUND}
         )
         SELECT EXISTS (SELECT 1 FROM claimed) AS "claimed", payment.status AS "paymentStatus", payment."left" AS "paymentLeft",
                payment.provider_charge_id IS NOT NULL AS "paymentCharged", inserted.*
           FROM (SELECT) AS one LEFT JOIN payment ON true LEFT JOIN inserted ON true`,
        params.values,
        { planOnce: true },
      );
      const { claimed, paymentStatus, paymentLeft, paymentCharged, ...inserted } = row as ClaimedRefund;
      if (!claimed) return undefined;
      if (inserted.id !== null) return inserted as Refund;
      if (paymentStatus === null) throw paymentNotFound(refund.paymentId);
      if (paymentStatus !== 'succeeded' || !paymentCharged) throw paymentNotRefundable(refund.paymentId, paymentStatus);
      throw amountTooLarge(paymentLeft as number);
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

/** What phase 1 returns: whether the key was claimed, the locked payment (nulls: none), the refund (nulls: none inserted). */
type ClaimedRefund = { claimed: boolean; paymentStatus: Payment['status'] | null; paymentLeft: number | null; paymentCharged: boolean | null } & {
  [Column in keyof Refund]: Refund[Column] | null;
};

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
