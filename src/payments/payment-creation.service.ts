import { randomUUID } from 'node:crypto';
import { Injectable, Logger } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type { AppConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import { CrashPoint } from '../common/crash-point';
import { errorForLog } from '../common/log-safety';
import type { HttpReply } from '../common/http-reply';
import { isUniqueViolation } from '../database/sql';
import { AnswerCache } from '../idempotency/answer-cache';
import { keyInUse, keyReused } from '../idempotency/idempotency.errors';
import { IdempotencyRepository } from '../ledger/idempotency.repository';
import { type HeldLease, type Lease, type StoredResponse, heldSince } from '../ledger/lease';
import { parseIdempotencyKey } from '../idempotency/idempotency-key';
import { keyVerdict } from '../idempotency/key-verdict';
import { Ledger } from '../ledger/ledger.service';
import { Metrics } from '../metrics/metrics';
import { ProviderClient } from '../provider/provider.client';
import { chargeInputFor, newPendingPayment } from './payment';
import { toResource } from '../ledger/payment-resource';
import { outcomeOfCharge } from '../ledger/payment-outcome';
import type { CreatePaymentDto } from './payments.dto';
import { orderAlreadyPaid, providerUnavailable } from './payments.errors';
import { PaymentsRepository } from '../ledger/payments.repository';
import { ACTIVE_ORDER_INDEX, type Payment } from '../ledger/payments.table';

export interface CreatePaymentCommand {
  clientId: string;
  idempotencyKeyHeader: string | string[] | undefined;
  fingerprint: string;
  body: CreatePaymentDto;
  requestId?: string;
}

/** How soon a client should come back for a payment whose outcome is not known yet. */
const PENDING_RETRY_AFTER_SECONDS = 2;
/** A review is settled by a provider re-check or a person: minutes at best, so poll gently. */
const IN_REVIEW_RETRY_AFTER_SECONDS = 60;
/** Claim conflicts resolve within a round or two; past that, answer 409 and let the client retry. */
const MAX_CLAIM_ROUNDS = 3;

/**
 * Where phase 1 leaves a request: holding the lease of a pending payment,
 * with an answer already stored, or with an undecided payment it must not
 * work on now (in review, or the provider's circuit is open).
 */
type Claim =
  | { kind: 'leased'; payment: Payment; lease: HeldLease }
  | { kind: 'replay'; response: StoredResponse }
  | { kind: 'accepted'; payment: Payment; retryAfterSeconds: number };

/** A stored response sent again, marked as such. */
export function replayOf(response: StoredResponse): HttpReply {
  return { ...response, headers: { 'Idempotent-Replayed': 'true' } };
}

/** An undecided payment as it is now: come back later, the same key will tell more. */
function acceptedReply(payment: Payment, retryAfterSeconds: number): HttpReply {
  return {
    status: 202,
    body: JSON.stringify(toResource(payment)),
    headers: { 'Retry-After': String(retryAfterSeconds) },
  };
}

/**
 * Creating a payment is two statements, each its own commit, with the
 * provider call between them:
 *
 *   1. claimAndCreatePending: claim the idempotency key and insert the pending
 *      payment, in one statement. After it, a retry finds the key and never
 *      makes a second payment.
 *   2. the provider call, with no transaction open, under a provider key
 *      derived from the payment id, so repeating it charges at most once.
 *   3. Ledger.recordOutcome: move the payment out of pending, announce it and
 *      store the response on the key, in one statement, fenced by the lease token.
 *
 * A crash between 1 and 3 leaves a pending payment whose lease expires; a
 * retry then resumes it (same id, same provider key), or the reconciliation
 * worker finishes it and stores the response a late retry will replay.
 */
@Injectable()
export class PaymentCreationService {
  private readonly logger = new Logger(PaymentCreationService.name);

  constructor(
    private readonly dataSource: DataSource,
    private readonly keys: IdempotencyRepository,
    private readonly payments: PaymentsRepository,
    private readonly ledger: Ledger,
    private readonly provider: ProviderClient,
    private readonly metrics: Metrics,
    @InjectConfig() private readonly config: AppConfig,
    private readonly crashPoint: CrashPoint,
    private readonly answers: AnswerCache,
  ) {}

  async create(command: CreatePaymentCommand): Promise<HttpReply> {
    const reply = await this.createOrReplay(command);
    const replayed = reply.headers['Idempotent-Replayed'] === 'true';
    this.metrics.paymentAnswers.inc({ status: String(reply.status), replayed: String(replayed) });
    return reply;
  }

  private async createOrReplay(command: CreatePaymentCommand): Promise<HttpReply> {
    const key = parseIdempotencyKey(command.idempotencyKeyHeader);
    const lease: Lease = { clientId: command.clientId, key, token: randomUUID() };
    const claim = await this.claim(command, lease);
    if (claim.kind === 'replay') return replayOf(claim.response);
    if (claim.kind === 'accepted') return acceptedReply(claim.payment, claim.retryAfterSeconds);
    this.crashPoint.reach('after_claim', { paymentId: claim.payment.id });
    return this.charge(claim.payment, claim.lease, command);
  }

  /**
   * Reads the key and acts on what it says (see KeyVerdict). The read takes
   * no lock and decides no race, so most repeats of a key (replays, and the
   * 409s of a retry storm) cost one indexed lookup: two requests that both
   * find no key meet at the claim's primary key, two that both find an
   * abandoned one meet at the conditional lease takeover, and the loser
   * reads again.
   */
  private async claim(command: CreatePaymentCommand, lease: Lease): Promise<Claim> {
    const known = this.answers.get(lease.clientId, lease.key);
    if (known) {
      if (known.fingerprint !== command.fingerprint) throw keyReused();
      return { kind: 'replay', response: known.response };
    }
    const db = this.dataSource.manager;
    const { leaseMs } = this.config.idempotency;
    for (let round = 0; round < MAX_CLAIM_ROUNDS; round++) {
      const askedAt = performance.now();
      const state = await this.keys.find(db, lease.clientId, lease.key);
      if (state?.response && state.expiresInMs !== null) {
        const answer = { fingerprint: state.fingerprint, response: state.response };
        this.answers.remember(lease.clientId, lease.key, answer, state.expiresInMs, askedAt);
      }
      const verdict = keyVerdict(state, command.fingerprint);
      switch (verdict.kind) {
        case 'replay':
          return verdict;
        case 'reused':
          throw keyReused();
        case 'in_progress':
          throw keyInUse();
        case 'new': {
          this.refuseWhileProviderDown(lease.clientId);
          const askedAt = performance.now();
          const payment = await this.claimAndCreatePending(command, lease);
          if (payment) return { kind: 'leased', payment, lease: heldSince(lease, askedAt, leaseMs) };
          break;
        }
        case 'resumable': {
          const waitMs = this.provider.unavailableForMs(lease.clientId);
          if (waitMs > 0) {
            // A charge may exist for this payment, so "no charge was attempted"
            // (503) would be false: the client learns the payment as it is.
            // No lease is taken, so the payment may have been decided since
            // the key was read: its key then holds the answer, and the next
            // round replays it.
            const payment = await this.payments.findForClient(db, lease.clientId, verdict.paymentId);
            if (payment?.status !== 'pending' && payment?.status !== 'requires_review') break;
            return { kind: 'accepted', payment, retryAfterSeconds: Math.ceil(waitMs / 1000) };
          }
          const askedAt = performance.now();
          if (!(await this.keys.takeOverLease(db, lease, verdict.paymentId, leaseMs))) break;
          const payment = await this.ledger.undecidedPayment({ clientId: lease.clientId, id: verdict.paymentId });
          if (payment.status === 'requires_review') {
            // Not ours to resume: the review re-check or a person decides it.
            await this.keys.release(db, lease);
            return { kind: 'accepted', payment, retryAfterSeconds: IN_REVIEW_RETRY_AFTER_SECONDS };
          }
          this.logger.log({ msg: 'resuming payment', paymentId: payment.id });
          return { kind: 'leased', payment, lease: heldSince(lease, askedAt, leaseMs) };
        }
      }
    }
    throw keyInUse();
  }

  /**
   * Phase 1: the key claim and the pending payment, one statement and so one
   * commit. Undefined when the key was claimed by someone else since it was read.
   */
  private async claimAndCreatePending(command: CreatePaymentCommand, lease: Lease): Promise<Payment | undefined> {
    const { body } = command;
    try {
      return await this.payments.insertPendingUnderClaim(
        this.dataSource.manager,
        newPendingPayment(command.clientId, body),
        { lease, fingerprint: command.fingerprint, leaseMs: this.config.idempotency.leaseMs },
      );
    } catch (error) {
      if (isUniqueViolation(error, ACTIVE_ORDER_INDEX)) throw orderAlreadyPaid(body.order_id);
      throw error;
    }
  }

  /**
   * Phase 2 and 3. The provider is called only while the lease holds (see
   * Ledger.holdForCall): a request that stalled past it and was taken over
   * makes no call and answers with what the new holder stored. A definitive
   * answer is recorded; anything else (provider
   * down, timeouts past the deadline, a charge the provider still holds as
   * pending) leaves the payment pending, releases the key so a retry resumes
   * it at once, and answers 202: the outcome is unknown, never guessed. A
   * charge for another amount sends the payment to review: 202 as well.
   */
  private async charge(payment: Payment, claimed: HeldLease, command: CreatePaymentCommand): Promise<HttpReply> {
    const lease = await this.ledger.holdForCall(claimed, this.config.provider.deadlineMs);
    if (!lease) return this.answerAfterLostLease(claimed);
    this.crashPoint.reach('during_provider_call', { paymentId: payment.id });
    const context = { clientId: payment.clientId, requestId: command.requestId };
    const result = await this.provider.createCharge(chargeInputFor(payment), context);
    this.crashPoint.reach('before_outcome', { paymentId: payment.id });
    const outcome = result.kind === 'answered' ? outcomeOfCharge(result.charge, payment) : undefined;
    if (!outcome) {
      await this.keys.release(this.dataSource.manager, lease);
      return acceptedReply(payment, PENDING_RETRY_AFTER_SECONDS);
    }
    // The retention the statement returns counts from its now(), which is after this.
    const askedAt = performance.now();
    const [written] = await this.ledger.recordOutcomes([{ lease, payment, outcome }]);
    if (written.status === 'rejected') {
      // An answer that cannot be written is no answer: the payment stays
      // pending, its key is released for a retry, and reconciliation's ladder
      // takes it from there (to review, if it never can be written). Should
      // Postgres itself be down, the release fails too and the request is a 5xx.
      this.logger.error({ msg: 'provider answer could not be recorded', paymentId: payment.id, err: errorForLog(written.reason) });
      await this.keys.release(this.dataSource.manager, lease);
      return acceptedReply(payment, PENDING_RETRY_AFTER_SECONDS);
    }
    const recorded = written.value;
    if (!recorded) return this.answerAfterLostLease(lease);
    if (!recorded.response || recorded.expiresInMs === undefined) {
      return acceptedReply(recorded.payment, IN_REVIEW_RETRY_AFTER_SECONDS);
    }
    const answer = { fingerprint: command.fingerprint, response: recorded.response };
    this.answers.remember(lease.clientId, lease.key, answer, recorded.expiresInMs, askedAt);
    return { ...recorded.response, headers: {} };
  }

  /**
   * We held a definitive answer but our lease had been taken over. The new
   * holder works on the same payment with the same provider key, so both
   * answers agree; replay its stored response if it has finished.
   */
  private async answerAfterLostLease(lease: Lease): Promise<HttpReply> {
    this.logger.warn({ msg: 'lease lost before the outcome was recorded', key: lease.key });
    const state = await this.keys.find(this.dataSource.manager, lease.clientId, lease.key);
    if (state?.response) return replayOf(state.response);
    throw keyInUse();
  }

  /**
   * Before any work: while the provider's circuit is open for this client (its
   * own, or the provider-wide one) a charge cannot succeed, so nothing is
   * claimed or written and the client learns when to come back. Replays were answered already: they need no provider. Once a
   * probe is due the circuit lets the request through, and its charge is the
   * probe.
   */
  private refuseWhileProviderDown(clientId: string): void {
    const waitMs = this.provider.unavailableForMs(clientId);
    if (waitMs > 0) throw providerUnavailable(waitMs);
  }
}
