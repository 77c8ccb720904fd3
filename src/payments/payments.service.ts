import { randomUUID } from 'node:crypto';
import { Injectable, Logger } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type { AppConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import { CrashPoint } from '../common/crash-point';
import { DomainError, ErrorCode } from '../common/domain-error';
import { isUniqueViolation } from '../database/sql';
import {
  IdempotencyRepository,
  type KeyState,
  type Lease,
  type StoredResponse,
} from '../idempotency/idempotency.repository';
import { parseIdempotencyKey } from '../idempotency/idempotency-key';
import { Metrics } from '../metrics/metrics';
import { ProviderClient } from '../provider/provider.client';
import { type Payment, type PaymentResource, newPaymentId, providerKeyFor, toResource } from './payment';
import { type FinalOutcome, finalResponseFor, outcomeOfCharge } from './payment-outcome';
import type { CreatePaymentDto } from './payments.dto';
import { ACTIVE_ORDER_INDEX, PaymentsRepository } from './payments.repository';

/** What the HTTP layer sends: status, exact body bytes and headers. */
export interface PaymentReply extends StoredResponse {
  headers: Record<string, string>;
}

export interface CreatePaymentCommand {
  clientId: string;
  idempotencyKeyHeader: string | string[] | undefined;
  fingerprint: string;
  body: CreatePaymentDto;
  requestId?: string;
}

/** How soon a client should come back for a payment whose outcome is not known yet. */
const PENDING_RETRY_AFTER_SECONDS = 2;
/** A request holding the key finishes within the provider deadline; polling each second is cheap. */
const IN_PROGRESS_RETRY_AFTER_SECONDS = 1;
/** Claim conflicts resolve within a round or two; past that, answer 409 and let the client retry. */
const MAX_CLAIM_ROUNDS = 3;

/** A stored response sent again, marked as such. */
function replayOf(response: StoredResponse): PaymentReply {
  return { ...response, headers: { 'Idempotent-Replayed': 'true' } };
}

type Start =
  | { kind: 'acquired'; payment: Payment; lease: Lease }
  | { kind: 'replay'; response: StoredResponse };

/**
 * Creating a payment is two transactions with the provider call between them:
 *
 *   1. claimAndCreatePending: claim the idempotency key and insert the pending
 *      payment, in one commit. After it, a retry finds the key and never makes
 *      a second payment.
 *   2. the provider call, with no transaction open, under a provider key
 *      derived from the payment id, so repeating it charges at most once.
 *   3. recordOutcome: move the payment out of pending and store the response on
 *      the key, in one commit, fenced by the lease token.
 *
 * A crash between 1 and 3 leaves a pending payment whose lease expires; a
 * retry then resumes it (same id, same provider key), or the reconciliation
 * worker finishes it and stores the response a late retry will replay.
 */
@Injectable()
export class PaymentsService {
  private readonly logger = new Logger(PaymentsService.name);

  constructor(
    private readonly dataSource: DataSource,
    private readonly keys: IdempotencyRepository,
    private readonly payments: PaymentsRepository,
    private readonly provider: ProviderClient,
    private readonly metrics: Metrics,
    @InjectConfig() private readonly config: AppConfig,
    private readonly crashPoint: CrashPoint,
  ) {}

  async create(command: CreatePaymentCommand): Promise<PaymentReply> {
    const reply = await this.createOrReplay(command);
    const replayed = reply.headers['Idempotent-Replayed'] === 'true';
    this.metrics.paymentAnswers.inc({ status: String(reply.status), replayed: String(replayed) });
    return reply;
  }

  private async createOrReplay(command: CreatePaymentCommand): Promise<PaymentReply> {
    const key = parseIdempotencyKey(command.idempotencyKeyHeader);
    // One indexed read first, no transaction and no lock: most repeats of a
    // key (replays, and the 409s of a retry storm) are answered from it. It
    // decides no race: the claim's INSERT and the lease takeover do.
    const existing = await this.keys.find(this.dataSource.manager, command.clientId, key);
    // An expired key whose payment is final is a new request: the claim takes it over.
    const live = existing && !(existing.expired && existing.response) ? existing : undefined;
    const settled = live && this.answerFromKey(live, command.fingerprint);
    if (settled) return replayOf(settled);
    this.refuseWhileProviderDown();
    const lease: Lease = { clientId: command.clientId, key, token: randomUUID() };
    const start = live
      ? await this.resumeExisting(lease, command.fingerprint)
      : await this.claimAndCreatePending(command, lease);
    if (start.kind === 'replay') return replayOf(start.response);
    this.crashPoint.reach('after_claim', { paymentId: start.payment.id });
    return this.charge(start.payment, start.lease, command.requestId);
  }

  async get(clientId: string, id: string): Promise<PaymentResource> {
    const payment = await this.payments.findForClient(this.dataSource.manager, clientId, id);
    if (!payment) throw new DomainError(ErrorCode.NotFound, `No payment ${id}.`, { param: 'id' });
    return toResource(payment);
  }

  async list(
    clientId: string,
    page: { limit?: number; startingAfter?: string },
  ): Promise<{ object: 'list'; data: PaymentResource[]; has_more: boolean }> {
    const db = this.dataSource.manager;
    if (page.startingAfter !== undefined && !(await this.payments.findForClient(db, clientId, page.startingAfter))) {
      throw new DomainError(ErrorCode.ParameterInvalid, `No payment ${page.startingAfter}.`, {
        param: 'starting_after',
      });
    }
    const result = await this.payments.listForClient(db, clientId, {
      limit: page.limit ?? 10,
      startingAfter: page.startingAfter,
    });
    return { object: 'list', data: result.payments.map(toResource), has_more: result.hasMore };
  }

  /**
   * Phase 2 and 3. A definitive answer is recorded; anything else (provider
   * down, timeouts past the deadline, a charge the provider still holds as
   * pending) leaves the payment pending, releases the key so a retry resumes
   * it at once, and answers 202: the outcome is unknown, never guessed.
   */
  private async charge(payment: Payment, lease: Lease, requestId?: string): Promise<PaymentReply> {
    this.crashPoint.reach('during_provider_call', { paymentId: payment.id });
    const result = await this.provider.createCharge(
      {
        providerKey: payment.providerKey,
        amount: payment.amount,
        currency: payment.currency,
        paymentMethod: payment.paymentMethod,
        reference: payment.id,
      },
      { requestId },
    );
    this.crashPoint.reach('before_outcome', { paymentId: payment.id });
    const outcome = result.kind === 'answered' ? outcomeOfCharge(result.charge, payment) : undefined;
    if (outcome) {
      const response = await this.recordOutcome(lease, payment.id, outcome);
      return response ? { ...response, headers: {} } : this.answerAfterLostLease(lease);
    }
    await this.keys.release(this.dataSource.manager, lease);
    return {
      status: 202,
      body: JSON.stringify(toResource(payment)),
      headers: { 'Retry-After': String(PENDING_RETRY_AFTER_SECONDS) },
    };
  }

  /**
   * Phase 3, shared with the reconciliation worker: the final status and the
   * response a retry will replay, in one transaction. Returns undefined, and
   * writes nothing, when the lease was lost to another request or worker.
   */
  async recordOutcome(lease: Lease, paymentId: string, outcome: FinalOutcome): Promise<StoredResponse | undefined> {
    return this.dataSource.transaction(async (db) => {
      if (!(await this.keys.lockIfLeaseHeld(db, lease))) return undefined;
      const payment = await this.payments.transitionFromPending(db, paymentId, outcome);
      if (!payment) {
        // Only a lease holder moves a payment out of pending, and it completes
        // the key in the same commit; a final payment under a live lease means
        // the schema's invariants were bypassed.
        throw new Error(`payment ${paymentId} under lease ${lease.token} is not pending`);
      }
      const response = finalResponseFor(payment);
      await this.keys.complete(db, lease, response);
      return response;
    });
  }

  /**
   * The worker's "not yet": counts the attempt (unless none was made: the
   * provider's circuit was open), sets when the next one is due and releases
   * the lease, in one transaction fenced like recordOutcome.
   */
  async postponeReconciliation(
    lease: Lease,
    paymentId: string,
    delayMs: number,
    { countAttempt = true } = {},
  ): Promise<boolean> {
    return this.dataSource.transaction(async (db) => {
      if (!(await this.keys.lockIfLeaseHeld(db, lease))) return false;
      await this.payments.postponeReconciliation(db, paymentId, delayMs, { countAttempt });
      await this.keys.release(db, lease);
      return true;
    });
  }

  /**
   * Phase 1: the key claim and the pending payment in one commit, or, when the
   * key exists, what that key says: replay, mismatch, in progress, or an
   * unfinished payment whose lease is free to take over.
   */
  private async claimAndCreatePending(command: CreatePaymentCommand, lease: Lease): Promise<Start> {
    const paymentId = newPaymentId();
    const { body } = command;
    let created: Payment | undefined;
    try {
      created = await this.dataSource.transaction(async (db) => {
        const claimed = await this.keys.claim(db, {
          lease,
          fingerprint: command.fingerprint,
          paymentId,
          leaseMs: this.config.idempotency.leaseMs,
          ttlHours: this.config.idempotency.keyTtlHours,
        });
        if (!claimed) return undefined;
        return this.payments.insertPending(db, {
          id: paymentId,
          clientId: command.clientId,
          amount: body.amount,
          currency: body.currency,
          paymentMethod: body.payment_method,
          orderId: body.order_id ?? null,
          description: body.description ?? null,
          metadata: body.metadata ?? {},
          providerKey: providerKeyFor(paymentId),
        });
      });
    } catch (error) {
      if (isUniqueViolation(error, ACTIVE_ORDER_INDEX)) {
        throw new DomainError(
          ErrorCode.OrderAlreadyPaid,
          `Order ${body.order_id} already has a payment that did not fail.`,
          { param: 'order_id' },
        );
      }
      throw error;
    }
    if (created) return { kind: 'acquired', payment: created, lease };
    return this.resumeExisting(lease, command.fingerprint);
  }

  private async resumeExisting(lease: Lease, fingerprint: string): Promise<Start> {
    const db = this.dataSource.manager;
    for (let round = 0; round < MAX_CLAIM_ROUNDS; round++) {
      const state = await this.keys.find(db, lease.clientId, lease.key);
      if (!state) break; // pruned since it was read: rare; the client's retry claims afresh
      const settled = this.answerFromKey(state, fingerprint);
      if (settled) return { kind: 'replay', response: settled };
      if (await this.keys.takeOverLease(db, lease, this.config.idempotency.leaseMs)) {
        const payment = await this.payments.findById(db, state.paymentId);
        if (!payment || payment.status !== 'pending') {
          throw new Error(`key of payment ${state.paymentId} is unfinished but the payment is not pending`);
        }
        this.logger.log({ msg: 'resuming payment', paymentId: payment.id });
        return { kind: 'acquired', payment, lease };
      }
      // Another request took the lease between our read and our update: look again.
    }
    throw this.inProgress();
  }

  /**
   * We held a definitive answer but our lease had been taken over. The new
   * holder works on the same payment with the same provider key, so both
   * answers agree; replay its stored response if it has finished.
   */
  private async answerAfterLostLease(lease: Lease): Promise<PaymentReply> {
    this.logger.warn({ msg: 'lease lost before the outcome was recorded', key: lease.key });
    const state = await this.keys.find(this.dataSource.manager, lease.clientId, lease.key);
    if (state?.response) return replayOf(state.response);
    throw this.inProgress();
  }

  /**
   * What an existing key answers without any work: a different request under
   * it is refused before anything else (422 even while the original runs), a
   * stored response is replayed, a live lease means 409. Undefined: the key's
   * payment is unfinished and nobody holds it, so it may be resumed.
   */
  private answerFromKey(state: KeyState, fingerprint: string): StoredResponse | undefined {
    if (state.fingerprint !== fingerprint) throw this.keyReused();
    if (state.response) return state.response;
    if (state.leaseRemainingSeconds > 0) throw this.inProgress();
    return undefined;
  }

  /**
   * Before any work: while the provider's circuit is open a charge cannot
   * succeed, so nothing is claimed or written and the client learns when to
   * come back. Replays were answered already: they need no provider. Once a
   * probe is due the circuit lets the request through, and its charge is the
   * probe.
   */
  private refuseWhileProviderDown(): void {
    const waitMs = this.provider.unavailableForMs();
    if (waitMs > 0) {
      throw new DomainError(
        ErrorCode.ProviderUnavailable,
        'The payment provider is unavailable; no charge was attempted. Retry later with the same Idempotency-Key.',
        { retryAfterSeconds: Math.ceil(waitMs / 1000) },
      );
    }
  }

  private keyReused(): DomainError {
    return new DomainError(
      ErrorCode.IdempotencyKeyReused,
      'This Idempotency-Key was used with a different request; use a new key for a new payment.',
    );
  }

  private inProgress(): DomainError {
    return new DomainError(
      ErrorCode.IdempotencyKeyInUse,
      'A request with this Idempotency-Key is still in progress; retry later.',
      { retryAfterSeconds: IN_PROGRESS_RETRY_AFTER_SECONDS },
    );
  }
}
