import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { queryRow, queryRows } from '../database/sql';
import type { Payment, PaymentStatus } from './payment';
import type { FinalOutcome } from './payment-outcome';

interface PaymentRow {
  id: string;
  client_id: string;
  amount: number;
  currency: string;
  payment_method: string;
  order_id: string | null;
  description: string | null;
  metadata: Record<string, string>;
  status: PaymentStatus;
  provider_key: string;
  provider_charge_id: string | null;
  failure_code: string | null;
  failure_message: string | null;
  reconcile_attempts: number;
  created_at: Date;
  updated_at: Date;
}

function toPayment(row: PaymentRow): Payment {
  return {
    id: row.id,
    clientId: row.client_id,
    amount: row.amount,
    currency: row.currency,
    paymentMethod: row.payment_method,
    orderId: row.order_id,
    description: row.description,
    metadata: row.metadata,
    status: row.status,
    providerKey: row.provider_key,
    providerChargeId: row.provider_charge_id,
    failureCode: row.failure_code,
    failureMessage: row.failure_message,
    reconcileAttempts: row.reconcile_attempts,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

export interface NewPayment {
  id: string;
  clientId: string;
  amount: number;
  currency: string;
  paymentMethod: string;
  orderId: string | null;
  description: string | null;
  metadata: Record<string, string>;
  providerKey: string;
}

/** Name of the partial unique index behind `order_already_paid`. */
export const ACTIVE_ORDER_INDEX = 'payments_client_order_active_key';

@Injectable()
export class PaymentsRepository {
  async insertPending(db: EntityManager, payment: NewPayment): Promise<Payment> {
    const row = await queryRow<PaymentRow>(
      db,
      `INSERT INTO payments
         (id, client_id, amount, currency, payment_method, order_id, description, metadata, provider_key)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
       RETURNING *`,
      [
        payment.id,
        payment.clientId,
        payment.amount,
        payment.currency,
        payment.paymentMethod,
        payment.orderId,
        payment.description,
        JSON.stringify(payment.metadata),
        payment.providerKey,
      ],
    );
    return toPayment(row!);
  }

  async findById(db: EntityManager, id: string): Promise<Payment | undefined> {
    const row = await queryRow<PaymentRow>(db, `SELECT * FROM payments WHERE id = $1`, [id]);
    return row && toPayment(row);
  }

  async findForClient(db: EntityManager, clientId: string, id: string): Promise<Payment | undefined> {
    const row = await queryRow<PaymentRow>(db, `SELECT * FROM payments WHERE id = $1 AND client_id = $2`, [
      id,
      clientId,
    ]);
    return row && toPayment(row);
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
    const rows = await queryRows<PaymentRow>(
      db,
      `SELECT * FROM payments
        WHERE client_id = $1
          AND ($2::text IS NULL
               OR (created_at, id) < (SELECT created_at, id FROM payments WHERE id = $2 AND client_id = $1))
        ORDER BY created_at DESC, id DESC
        LIMIT $3`,
      [clientId, page.startingAfter ?? null, page.limit + 1],
    );
    return { payments: rows.slice(0, page.limit).map(toPayment), hasMore: rows.length > page.limit };
  }

  /**
   * The conditional transition that makes terminal states final: only a
   * pending payment moves, so no later write can overturn an outcome.
   */
  async transitionFromPending(db: EntityManager, id: string, outcome: FinalOutcome): Promise<Payment | undefined> {
    const row = await queryRow<PaymentRow>(
      db,
      `UPDATE payments
          SET status = $2, provider_charge_id = COALESCE($3, provider_charge_id),
              failure_code = $4, failure_message = $5, updated_at = now()
        WHERE id = $1 AND status = 'pending'
        RETURNING *`,
      [
        id,
        outcome.status,
        'providerChargeId' in outcome ? outcome.providerChargeId : null,
        outcome.status === 'succeeded' ? null : outcome.failureCode,
        outcome.status === 'succeeded' ? null : outcome.failureMessage,
      ],
    );
    return row && toPayment(row);
  }

  /**
   * Pending payments that reconciliation should look at now: older than the
   * stale threshold, due on their ladder, and not leased by a live request.
   */
  async findDueForReconciliation(db: EntityManager, staleAfterMs: number, limit: number): Promise<string[]> {
    const rows = await queryRows<{ id: string }>(
      db,
      `SELECT p.id
         FROM payments p
         JOIN idempotency_keys k ON k.payment_id = p.id
        WHERE p.status = 'pending'
          AND p.next_reconcile_at <= now()
          AND p.created_at <= now() - $1 * interval '1 millisecond'
          AND (k.leased_until IS NULL OR k.leased_until <= now())
        ORDER BY p.next_reconcile_at
        LIMIT $2`,
      [staleAfterMs, limit],
    );
    return rows.map((row) => row.id);
  }

  /** Sets when the next reconciliation attempt is due, counting the one just made unless told otherwise. */
  async postponeReconciliation(
    db: EntityManager,
    id: string,
    delayMs: number,
    { countAttempt = true } = {},
  ): Promise<number> {
    const row = await queryRow<{ reconcile_attempts: number }>(
      db,
      `UPDATE payments
          SET reconcile_attempts = reconcile_attempts + $3,
              next_reconcile_at = now() + $2 * interval '1 millisecond'
        WHERE id = $1 AND status = 'pending'
        RETURNING reconcile_attempts`,
      [id, delayMs, countAttempt ? 1 : 0],
    );
    return row?.reconcile_attempts ?? 0;
  }
}
