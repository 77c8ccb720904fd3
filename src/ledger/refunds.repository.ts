import { Injectable } from '@nestjs/common';
import { type EntityManager, QueryFailedError } from 'typeorm';
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
   * Phase 1 of a refund, in one statement, in the lock order every writer
   * follows (key row, then the payment's row):
   *
   *   1. the key's claim (claimedCte); no row, with nothing written, when
   *      someone else holds the key;
   *   2. the payment, locked (FOR UPDATE, only once the key is claimed);
   *   3. the checks: the payment is this client's and succeeded, and the
   *      amount asked is at most what is left to refund (its amount less
   *      its refunds not failed, amount_reserved); all that is left when no
   *      amount is asked;
   *   4. the reservation (amount_reserved raised by the refund's amount) and
   *      the pending refund.
   *
   * A failed check calls refusal() (migration RefusalInAStatement), which
   * raises: the statement fails as a whole, the key's claim with it, so a
   * refusal writes nothing, as a rolled-back transaction would, in one
   * round trip instead of five. Under the payment's lock, concurrent refunds
   * of one payment queue, each sees what the ones before it reserved, and
   * together they never reserve more than the payment; the schema's
   * payments_refunds_check would refuse it anyway.
   *
   * Postgres runs a CTE that only reads as far as something reads it, and
   * the reservation's join may never ask for the checks (no payment: nothing
   * to join). So the statement's own result is read from the checks: every
   * row of them is computed, and a refusal raised, whatever the joins do.
   */
  async insertPendingUnderClaim(db: EntityManager, refund: RefundRequest, claim: KeyClaim): Promise<Refund | undefined> {
    const params = new Params();
    const id = params.add(refund.id);
    const client = params.add(refund.clientId);
    const claimed = claimedCte(params, claim, REFUNDS, { id, client });
    // Anything but a payment id names no payment (and may hold what Postgres
    // text refuses): it is looked up as no id at all and refused as not
    // found, after the claim, so that a key already in use still gets its
    // verdict (a replay, a 409, a 422) first.
    const paymentId = params.add(PAYMENT_ID_PATTERN.test(refund.paymentId) ? refund.paymentId : null, 'text');
    const amount = params.add(refund.amount ?? null, 'integer');
    try {
      return await queryRow<Refund>(
        db,
        `WITH ${claimed},
         payment AS MATERIALIZED (
           SELECT status, amount, amount_reserved, currency, provider_charge_id
             FROM payments
            WHERE id = ${paymentId} AND client_id = ${client} AND EXISTS (SELECT 1 FROM claimed)
              FOR UPDATE
         ),
         checked AS MATERIALIZED (
           SELECT CASE
                    WHEN p.status IS NULL THEN refusal('${NOT_FOUND}', NULL)
                    WHEN p.status <> 'succeeded' OR p.provider_charge_id IS NULL THEN refusal('${NOT_REFUNDABLE}', p.status)
                    WHEN COALESCE(${amount}, p.amount - p.amount_reserved) NOT BETWEEN 1 AND p.amount - p.amount_reserved
                      THEN refusal('${TOO_LARGE}', (p.amount - p.amount_reserved)::text)
                    ELSE COALESCE(${amount}, p.amount - p.amount_reserved)
                  END AS amount,
                  p.currency, p.provider_charge_id
             FROM claimed LEFT JOIN payment p ON true
         ),
         reserved AS (
           UPDATE payments SET amount_reserved = amount_reserved + checked.amount
             FROM checked
            WHERE payments.id = ${paymentId} AND payments.client_id = ${client}
            RETURNING checked.amount, checked.currency, checked.provider_charge_id
         ),
         inserted AS (
           INSERT INTO refunds (id, client_id, payment_id, amount, currency, reason, metadata, provider_key, provider_charge_id, trace_parent)
           SELECT ${id}, ${client}, ${paymentId}, reserved.amount, reserved.currency,
                  ${params.add(refund.reason)}, ${params.add(JSON.stringify(refund.metadata))}, ${params.add(refund.providerKey)},
                  reserved.provider_charge_id, ${params.add(currentTraceparent())}
             FROM reserved
           RETURNING ${REFUND}
         )
         SELECT inserted.* FROM checked LEFT JOIN inserted ON true`,
        params.values,
        { planOnce: true },
      );
    } catch (error) {
      throw refusalOf(error, refund.paymentId) ?? error;
    }
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

/** The reasons refusal() is called with, in the statement's text. */
const NOT_FOUND = 'payment_not_found';
const NOT_REFUNDABLE = 'payment_not_refundable';
const TOO_LARGE = 'amount_too_large';

/** The domain error of a refusal() the phase-1 statement raised; undefined for any other failure. */
function refusalOf(error: unknown, paymentId: string): DomainError | undefined {
  const cause: unknown = error instanceof QueryFailedError ? error.driverError : error;
  const { code, message, detail } = (cause ?? {}) as { code?: string; message?: string; detail?: string };
  if (code !== 'PR001') return undefined;
  switch (message) {
    case NOT_FOUND:
      return paymentNotFound(paymentId);
    case NOT_REFUNDABLE:
      return paymentNotRefundable(paymentId, detail as Payment['status']);
    case TOO_LARGE:
      return amountTooLarge(Number(detail));
    default:
      return undefined;
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
