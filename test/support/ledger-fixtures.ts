import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { IdempotencyRepository } from '../../src/ledger/idempotency.repository';
import type { Lease } from '../../src/ledger/lease';
import { loadConfig } from '../../src/config/app-config';
import { decisionOf } from '../../src/ledger/ledger.service';
import { EventsRepository } from '../../src/merchant-events/events.repository';
import { newPaymentId, providerKeyFor } from '../../src/ledger/payment-id';
import { PAYMENTS, REFUNDS } from '../../src/ledger/operations';
import { type Decided, OperationsRepository } from '../../src/ledger/operations.repository';
import type { FinalOutcome } from '../../src/ledger/outcome';
import { PaymentsRepository } from '../../src/ledger/payments.repository';
import type { Payment, PaymentRef } from '../../src/ledger/payments.table';
import { newRefundId, providerRefundKeyFor } from '../../src/ledger/refund-id';
import { RefundsRepository } from '../../src/ledger/refunds.repository';
import type { Refund } from '../../src/ledger/refunds.table';
import { useTestDatabase } from './test-database';
import { createClient } from './test-env';

export const FINGERPRINT = 'f'.repeat(64);
export const LEASE_MS = 30_000;
export const TTL_HOURS = 24;

/**
 * Rows for the database specs, made through the repositories themselves, in
 * the shapes the request leaves behind.
 */
export class LedgerFixtures {
  readonly keys = new IdempotencyRepository();
  readonly payments = new PaymentsRepository();
  readonly refunds = new RefundsRepository();
  readonly rows = new OperationsRepository();
  readonly events = new EventsRepository();

  constructor(private readonly dataSource: DataSource) {}

  async client(): Promise<string> {
    return (await createClient(this.dataSource, 'db spec')).id;
  }

  /** A client whose events are pushed to `url`. */
  async clientWithWebhook(url = 'http://127.0.0.1:9/hooks'): Promise<string> {
    return (await createClient(this.dataSource, 'db spec with webhook', { webhookUrl: url })).id;
  }

  /** Phase 1 of a request: a claimed key and its pending payment, in one statement. */
  async claimed(clientId: string, key: string = randomUUID(), orderId: string | null = null): Promise<{ lease: Lease; payment: Payment }> {
    const lease: Lease = { clientId, key, token: randomUUID() };
    const payment = await this.claimAs(lease, FINGERPRINT, orderId);
    if (!payment) throw new Error(`key ${key} was not claimable`);
    return { lease, payment };
  }

  /**
   * A new request's phase 1 under `lease`: its payment, or undefined when the
   * key is not claimable. `orExpired`: also take over a key past its retention.
   */
  claimAs(lease: Lease, fingerprint: string, orderId: string | null = null, orExpired = true): Promise<Payment | undefined> {
    const id = newPaymentId();
    return this.payments.insertPendingUnderClaim(
      this.dataSource.manager,
      {
        id,
        clientId: lease.clientId,
        amount: 500,
        currency: 'USD',
        paymentMethod: 'pm_card_ok',
        orderId,
        description: null,
        metadata: { order: 'a' },
        providerKey: providerKeyFor(id),
      },
      { lease, fingerprint, leaseMs: LEASE_MS, orExpired },
    );
  }

  /**
   * The statement that decides a payment (recordOutcomeUnderLease), sent
   * under `lease` for the payment as read now; the ledger's own rendering of
   * the response and the event. Nothing else: the spec reads what it did.
   */
  async decided(lease: Lease, ref: PaymentRef, outcome: FinalOutcome, env: Record<string, string> = {}): Promise<Decided<Payment>> {
    const payment = await this.payments.findForClient(this.dataSource.manager, ref.clientId, ref.id);
    if (!payment) throw new Error(`no payment ${ref.id}`);
    const decision = decisionOf(PAYMENTS, payment, outcome, loadConfig(env));
    return this.rows.recordOutcomeUnderLease(this.dataSource.manager, PAYMENTS, lease, payment, decision);
  }

  /**
   * A decision by whoever comes to the payment next: its lease taken over
   * (a live one expired first, as time would), the outcome recorded, the key
   * settled with it. Undefined when the payment could not move so, with
   * nothing written but the lease, released again.
   */
  async transitioned(ref: PaymentRef, outcome: FinalOutcome): Promise<Payment | undefined> {
    const manager = this.dataSource.manager;
    await this.dataSource.query(
      `UPDATE idempotency_keys SET leased_until = now() - interval '1 second'
        WHERE client_id = $1 AND payment_id = $2 AND leased_until IS NOT NULL`,
      [ref.clientId, ref.id],
    );
    const lease = await this.keys.takeOverLeaseFor(manager, PAYMENTS, ref, randomUUID(), LEASE_MS);
    if (!lease) return undefined; // its key holds the final answer: the payment is final
    const decided = await this.decided(lease, ref, outcome);
    if (decided.kind === 'recorded') return decided.row;
    await this.keys.release(manager, lease);
    return undefined;
  }

  /** A finished request: the payment succeeded and its key stores the 201, by the ledger's statement. */
  async succeeded(clientId: string, key: string = randomUUID()): Promise<{ lease: Lease; payment: Payment }> {
    const { lease, payment } = await this.claimed(clientId, key);
    const decided = await this.decided(lease, payment, { status: 'succeeded', providerId: 'ch_1' }, {
      IDEMPOTENCY_KEY_TTL_HOURS: String(TTL_HOURS),
    });
    if (decided.kind !== 'recorded') throw new Error(`payment ${payment.id} not decided: ${decided.kind}`);
    return { lease, payment };
  }

  /**
   * Phase 1 of a refund of a succeeded payment: a claimed key and its
   * pending refund, `amount` of it reserved on the payment (undefined: all
   * that is left), in the refund's own claim.
   */
  async claimedRefund(
    payment: PaymentRef,
    amount?: number,
    key: string = randomUUID(),
  ): Promise<{ lease: Lease; refund: Refund }> {
    const lease: Lease = { clientId: payment.clientId, key, token: randomUUID() };
    const id = newRefundId();
    const refund = await this.refunds.insertPendingUnderClaim(
      this.dataSource.manager,
      { id, clientId: payment.clientId, paymentId: payment.id, amount, reason: null, metadata: {}, providerKey: providerRefundKeyFor(id) },
      { lease, fingerprint: FINGERPRINT, leaseMs: LEASE_MS, orExpired: true },
    );
    if (!refund) throw new Error(`key ${key} was not claimable`);
    return { lease, refund };
  }

  /** The statement that decides a refund, as `decided` does for a payment. */
  async decidedRefund(lease: Lease, refund: Refund, outcome: FinalOutcome): Promise<Decided<Refund>> {
    const decision = decisionOf(REFUNDS, refund, outcome, loadConfig({}));
    return this.rows.recordOutcomeUnderLease(this.dataSource.manager, REFUNDS, lease, refund, decision);
  }

  /** Moves the key's lease into the past, as time would. */
  async expireLease(lease: Lease): Promise<void> {
    await this.dataSource.query(
      `UPDATE idempotency_keys SET leased_until = now() - interval '1 second' WHERE client_id = $1 AND key = $2`,
      [lease.clientId, lease.key],
    );
  }

  /** Moves a finished key's retention into the past. */
  async expireRetention(lease: Lease): Promise<void> {
    await this.dataSource.query(
      `UPDATE idempotency_keys SET expires_at = now() - interval '1 second' WHERE client_id = $1 AND key = $2`,
      [lease.clientId, lease.key],
    );
  }

  /** Makes the key's claim (and its payment) ten years old, far past any retention. */
  async ageClaim(lease: Lease): Promise<void> {
    await this.dataSource.query(
      `UPDATE idempotency_keys SET created_at = now() - interval '10 years' WHERE client_id = $1 AND key = $2`,
      [lease.clientId, lease.key],
    );
  }

  async paymentById(id: string): Promise<Payment | undefined> {
    return this.payments.findById(this.dataSource.manager, id);
  }

  async refundById(id: string): Promise<Refund | undefined> {
    return this.refunds.findById(this.dataSource.manager, id);
  }
}

/**
 * The test database (emptied before each test), fixtures over it, and one
 * client to own the rows. Read the fields inside hooks and tests.
 */
export function useLedgerFixtures(): { readonly dataSource: DataSource; readonly given: LedgerFixtures; readonly clientId: string } {
  const db = useTestDatabase();
  const handle = {} as { dataSource: DataSource; given: LedgerFixtures; clientId: string };
  beforeEach(async () => {
    handle.dataSource = db.dataSource;
    handle.given = new LedgerFixtures(db.dataSource);
    handle.clientId = await handle.given.client();
  });
  return handle;
}
