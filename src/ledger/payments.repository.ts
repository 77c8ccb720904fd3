import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { Params, queryRow, queryRows } from '../database/sql';
import { type KeyClaim, claimedCte } from './idempotency.repository';
import { currentTraceparent } from '../tracing/tracing';
import { PAYMENTS } from './operations';
import { type Payment, paymentsTable } from './payments.table';

const PAYMENT = paymentsTable.selectList;

/** What a new payment is made of; the rest comes from the schema's defaults. */
export type NewPayment = Pick<
  Payment,
  'id' | 'clientId' | 'amount' | 'currency' | 'paymentMethod' | 'orderId' | 'description' | 'metadata' | 'providerKey'
>;

/**
 * The payments table's own statements: the claim that creates a payment, and
 * the reads of the API and the operator. What happens to a payment after its
 * creation is written by the statements every operation shares
 * (OperationsRepository). findById (an operator's) does not name a client,
 * and reaches every shard.
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
      `WITH ${claimedCte(params, claim, PAYMENTS, { id, client })}
       INSERT INTO payments
         (id, client_id, amount, currency, payment_method, order_id, description, metadata, provider_key, trace_parent)
       SELECT ${id}, ${client}, ${params.add(payment.amount, 'integer')}, ${params.add(payment.currency, 'text')},
              ${params.add(payment.paymentMethod, 'text')}, ${params.add(payment.orderId, 'text')},
              ${params.add(payment.description, 'text')}, ${params.add(JSON.stringify(payment.metadata), 'jsonb')},
              ${params.add(payment.providerKey)},
              ${params.add(currentTraceparent())}
         FROM claimed
       RETURNING ${PAYMENT}`,
      params.values,
      { planOnce: true },
    );
  }

  /** For an operator, who knows a payment by its id alone. */
  async findById(db: EntityManager, id: string): Promise<Payment | undefined> {
    return queryRow<Payment>(db, `SELECT ${PAYMENT} FROM payments WHERE id = $1`, [id]);
  }

  async findForClient(db: EntityManager, clientId: string, id: string): Promise<Payment | undefined> {
    return queryRow<Payment>(db, `SELECT ${PAYMENT} FROM payments WHERE id = $1 AND client_id = $2`, [id, clientId], { planOnce: true });
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
    // `created_at IS NOT NULL` (true of every row) lets the list index serve
    // it: that index is partial, so that a lookup by id never does.
    const rows = await queryRows<Payment>(
      db,
      `SELECT ${PAYMENT} FROM payments
        WHERE client_id = $1 AND created_at IS NOT NULL
          AND ($2::text IS NULL
               OR (created_at, id) < (SELECT created_at, id FROM payments WHERE id = $2 AND client_id = $1))
        ORDER BY created_at DESC, id DESC
        LIMIT $3`,
      [clientId, page.startingAfter ?? null, page.limit + 1],
    );
    return { payments: rows.slice(0, page.limit), hasMore: rows.length > page.limit };
  }
}
