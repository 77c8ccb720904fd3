import { randomUUID } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import { DataSource, type EntityManager } from 'typeorm';
import type { AppConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import { IdempotencyRepository, type Lease, type StoredResponse } from '../idempotency/idempotency.repository';
import { EventsRepository } from '../merchant-events/events.repository';
import type { Payment } from '../payments/payments.table';
import { type FinalOutcome, finalResponseFor } from '../payments/payment-outcome';
import { type PaymentRef, PaymentsRepository } from '../payments/payments.repository';

/**
 * A lease and what this process knows of its expiry: Postgres cannot see it
 * expire before `heldUntil` (a performance.now() time), because that is the
 * lease's length counted from before the statement that took or renewed it.
 * Monotonic, so a stall of the process (a long GC pause, SIGSTOP) counts.
 */
export interface HeldLease extends Lease {
  heldUntil: number;
}

/** A lease taken or renewed by a statement sent at `askedAt` (performance.now()). */
export function heldSince(lease: Lease, askedAt: number, leaseMs: number): HeldLease {
  return { clientId: lease.clientId, key: lease.key, token: lease.token, heldUntil: askedAt + leaseMs };
}

/**
 * The only ways a payment changes after it is created. Every writer (the
 * request, the reconciliation worker) goes through here, and every write here
 * is fenced by the lease on the payment's idempotency key: one transaction
 * that first locks the key row if, and only if, the writer's lease token still
 * holds it. A writer that stalled past its lease and was taken over finds
 * another token and commits nothing, so two writers can never both decide a
 * payment. Every status change commits with its merchant event (the outbox),
 * and the schema refuses a commit that has one without the other.
 *
 * A lease's client is its payment's, so every statement here names the
 * client: on a schema sharded by client, each transaction runs on one shard.
 */
@Injectable()
export class Ledger {
  constructor(
    private readonly dataSource: DataSource,
    private readonly keys: IdempotencyRepository,
    private readonly payments: PaymentsRepository,
    private readonly events: EventsRepository,
    @InjectConfig() private readonly config: AppConfig,
  ) {}

  /**
   * Runs `work` in one transaction that holds the key row locked under this
   * lease. Undefined, with nothing written, when the lease was lost. A lease
   * that expired with no taker still holds: nobody else has acted on the payment.
   */
  async withLease<T extends NonNullable<unknown>>(
    lease: Lease,
    work: (db: EntityManager) => Promise<T>,
  ): Promise<T | undefined> {
    return this.dataSource.transaction(async (db) =>
      (await this.keys.lockIfLeaseHeld(db, lease)) ? work(db) : undefined,
    );
  }

  /**
   * Moves an undecided payment, in one commit with what its key keeps:
   *
   * - to succeeded or failed: the key stores the final response, replayed
   *   byte for byte from then on (`response`);
   * - to requires_review: the key keeps no answer (the payment is not final)
   *   and its lease is released, and the first review re-check is scheduled.
   *
   * Undefined, with nothing written, when the lease was lost.
   */
  async recordOutcome(lease: Lease, paymentId: string, outcome: FinalOutcome): Promise<Recorded | undefined> {
    return this.withLease(lease, (db) => this.applyUnderLease(db, lease, paymentId, outcome));
  }

  /**
   * recordOutcome for several payments of one client at once (a reconcile
   * job's batch), in one transaction: first the key rows these leases still
   * hold are locked, in key order, then each payment is decided exactly as
   * recordOutcome decides it. Each result is in its item's place: undefined,
   * with nothing written for that payment, when its lease was lost. One
   * commit instead of one per payment: the statements that fence and commit
   * are paid once per batch.
   */
  async recordOutcomes(
    items: { lease: Lease; paymentId: string; outcome: FinalOutcome }[],
  ): Promise<(Recorded | undefined)[]> {
    if (items.length === 0) return [];
    return this.dataSource.transaction(async (db) => {
      const held = await this.keys.lockHeldLeases(
        db,
        items.map(({ lease }) => lease),
      );
      const recorded: (Recorded | undefined)[] = [];
      for (const { lease, paymentId, outcome } of items) {
        recorded.push(held.has(lease.key) ? await this.applyUnderLease(db, lease, paymentId, outcome) : undefined);
      }
      return recorded;
    });
  }

  /**
   * A provider event's effect, inside the consumer's transaction (the one
   * that records the message as processed), under the same fence as every
   * other writer: the payment's lease is taken in this transaction, then the
   * charge's version is moved forward and, when the event carries a final
   * outcome for an undecided payment, the outcome is applied. Locks are taken
   * key row first, payment row second, as the request and the worker do, so
   * concurrent writers queue and never deadlock.
   *
   * - 'stale': the version is not newer than the last applied; nothing changes;
   * - 'noted': the version moved forward, the payment did not (a pending
   *   charge, or a payment already final);
   * - 'applied': the payment moved to the event's final outcome;
   * - 'busy': a request or the worker holds the lease right now: the caller
   *   rolls back and the event, redelivered, is applied later.
   */
  async applyProviderEvent(
    db: EntityManager,
    payment: Payment,
    event: { version: number; outcome?: FinalOutcome },
  ): Promise<'stale' | 'noted' | 'applied' | 'busy'> {
    const undecided = payment.status === 'pending' || payment.status === 'requires_review';
    if (!event.outcome || !undecided) {
      return (await this.payments.advanceProviderVersion(db, payment, event.version)) ? 'noted' : 'stale';
    }
    const lease = await this.keys.takeOverLeaseForPayment(db, payment, randomUUID(), this.config.idempotency.leaseMs);
    if (!lease) return 'busy';
    if (!(await this.payments.advanceProviderVersion(db, payment, event.version))) {
      await this.keys.release(db, lease);
      return 'stale';
    }
    await this.applyUnderLease(db, lease, payment.id, event.outcome);
    return 'applied';
  }

  /**
   * The body of every decision, in the caller's transaction: the transition,
   * the event that tells the merchant, and what the key keeps.
   */
  private async applyUnderLease(db: EntityManager, lease: Lease, paymentId: string, outcome: FinalOutcome): Promise<Recorded> {
    const ref = paymentOf(lease, paymentId);
    const payment = await this.payments.transition(db, ref, outcome);
    // Only a lease holder decides a payment, and it completes the key in the
    // same commit: a final payment under a live lease means the schema's
    // invariants were bypassed.
    if (!payment) throw notUndecidedUnderLease(paymentId);
    await this.events.recordPaymentChange(db, payment);
    if (payment.status === 'requires_review') {
      const delayMs = this.config.reconcile.reviewRecheckIntervalMs;
      await this.payments.scheduleReconciliation(db, ref, { delayMs, countAttempt: false });
      await this.keys.release(db, lease);
      return { payment };
    }
    const response = finalResponseFor(payment);
    await this.keys.complete(db, lease, response, this.config.idempotency.keyTtlHours);
    return { payment, response };
  }

  /**
   * No final answer yet: sets when reconciliation looks again (counting the
   * attempt, unless none was made) and releases the lease, in one commit.
   * False when the lease was lost.
   */
  async postpone(
    lease: Lease,
    paymentId: string,
    next: { delayMs: number | 'never'; countAttempt: boolean },
  ): Promise<boolean> {
    const postponed = await this.withLease(lease, async (db) => {
      await this.payments.scheduleReconciliation(db, paymentOf(lease, paymentId), next);
      await this.keys.release(db, lease);
      return true;
    });
    return postponed ?? false;
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

  /** The payment of an unfinished key: undecided, or its key would have been completed with it. */
  async undecidedPayment(ref: PaymentRef): Promise<Payment> {
    const payment = await this.payments.findForClient(this.dataSource.manager, ref.clientId, ref.id);
    if (payment?.status !== 'pending' && payment?.status !== 'requires_review') {
      throw notUndecidedUnderLease(ref.id);
    }
    return payment;
  }
}

/** What recordOutcome committed: the payment as it now is, and the response its key stores if it is final. */
export interface Recorded {
  payment: Payment;
  response?: StoredResponse;
}

/** The payment a lease is held for: the lease's client is the payment's. */
function paymentOf(lease: Lease, paymentId: string): PaymentRef {
  return { clientId: lease.clientId, id: paymentId };
}

function notUndecidedUnderLease(paymentId: string): Error {
  return new Error(`payment ${paymentId} has an unfinished key but is already final`);
}
