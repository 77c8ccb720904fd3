import { randomUUID } from 'node:crypto';
import { Injectable, Logger } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type { AppConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import { CrashPoint } from '../common/crash-point';
import { DomainError, ErrorCode } from '../common/domain-error';
import { errorForLog } from '../common/log-safety';
import type { HttpReply } from '../common/http-reply';
import { AnswerCache } from '../idempotency/answer-cache';
import { keyInUse, keyReused } from '../idempotency/idempotency.errors';
import { parseIdempotencyKey } from '../idempotency/idempotency-key';
import { keyVerdict } from '../idempotency/key-verdict';
import { IdempotencyRepository, type KeyClaim } from '../ledger/idempotency.repository';
import { type HeldLease, type Lease, type StoredResponse, heldSince } from '../ledger/lease';
import { Ledger } from '../ledger/ledger.service';
import type { OperationRow } from '../ledger/operation';
import { ProviderClient } from '../provider/provider.client';
import type { ProviderSide } from './provider-side';

/** What every idempotent POST brings, whatever it writes. */
export interface WriteCommand {
  clientId: string;
  idempotencyKeyHeader: string | string[] | undefined;
  fingerprint: string;
  requestId?: string;
}

/**
 * One operation's part in the flow: how it talks to the provider, and its
 * phase 1, the statement that claims the key and inserts the pending row in
 * one commit (undefined when someone else claimed the key since it was
 * read). Phase 1 throws the operation's own refusals (order_already_paid,
 * payment_not_refundable, amount_too_large), with nothing written.
 */
export interface Write<R extends OperationRow> {
  side: ProviderSide<R>;
  claimAndCreatePending(claim: KeyClaim): Promise<R | undefined>;
}

/** How soon a client should come back for a row whose outcome is not known yet. */
const PENDING_RETRY_AFTER_SECONDS = 2;
/** A review is settled by a provider re-check or a person: minutes at best, so poll gently. */
const IN_REVIEW_RETRY_AFTER_SECONDS = 60;
/** Claim conflicts resolve within a round or two; past that, answer 409 and let the client retry. */
const MAX_CLAIM_ROUNDS = 3;

/**
 * Where phase 1 leaves a request: holding the lease of a pending row, with
 * an answer already stored, or with an undecided row it must not work on
 * now (in review, or the provider's circuit is open).
 */
type Claim<R> =
  | { kind: 'leased'; row: R; lease: HeldLease }
  | { kind: 'replay'; response: StoredResponse }
  | { kind: 'accepted'; row: R; retryAfterSeconds: number };

/** A stored response sent again, marked as such. */
export function replayOf(response: StoredResponse): HttpReply {
  return { ...response, headers: { 'Idempotent-Replayed': 'true' } };
}

/**
 * Every idempotent POST (a payment, a refund) is two statements, each its
 * own commit, with the provider call between them:
 *
 *   1. Write.claimAndCreatePending: claim the idempotency key and insert the
 *      pending row, in one commit. After it, a retry finds the key and never
 *      makes a second row.
 *   2. the provider call, with no transaction open, under a provider key
 *      derived from the row's id, so repeating it acts at most once.
 *   3. Ledger.recordOutcome: move the row out of pending, announce it and
 *      store the response on the key, in one statement, fenced by the lease token.
 *
 * A crash between 1 and 3 leaves a pending row whose lease expires; a retry
 * then resumes it (same id, same provider key), or the reconciliation worker
 * finishes it and stores the response a late retry will replay.
 */
@Injectable()
export class IdempotentWrites {
  private readonly logger = new Logger(IdempotentWrites.name);

  constructor(
    private readonly dataSource: DataSource,
    private readonly keys: IdempotencyRepository,
    private readonly ledger: Ledger,
    private readonly provider: ProviderClient,
    @InjectConfig() private readonly config: AppConfig,
    private readonly crashPoint: CrashPoint,
    private readonly answers: AnswerCache,
  ) {}

  async run<R extends OperationRow>(write: Write<R>, command: WriteCommand): Promise<HttpReply> {
    const key = parseIdempotencyKey(command.idempotencyKeyHeader);
    const lease: Lease = { clientId: command.clientId, key, token: randomUUID() };
    const claim = await this.claim(write, command, lease);
    if (claim.kind === 'replay') return replayOf(claim.response);
    if (claim.kind === 'accepted') return this.acceptedReply(write, claim.row, claim.retryAfterSeconds);
    this.crashPoint.reach('after_claim', this.crashContext(write, claim.row));
    return this.callProvider(write, claim.row, claim.lease, command);
  }

  /**
   * Claims the key for a new row first: most keys are new, and their
   * request then sends one statement before the provider call. A key that
   * exists is left alone by that claim (not even locked), and is read and
   * acted on as it says (see KeyVerdict); so is every key while the
   * provider's circuit is open, since only a replay can succeed then. The
   * read takes no lock and decides no race: two requests that both find no
   * key meet at the claim's primary key, two that both find an abandoned or
   * expired one meet at the conditional takeover, and the loser reads again.
   * A key of another route never gets past the verdict: the fingerprint
   * covers the path, so it is `reused`.
   *
   * A repeat this process has not answered itself (its answer cache) costs
   * the claim that finds the key taken and the read: two indexed lookups.
   */
  private async claim<R extends OperationRow>(write: Write<R>, command: WriteCommand, lease: Lease): Promise<Claim<R>> {
    const known = this.answers.get(lease.clientId, lease.key);
    if (known) {
      if (known.fingerprint !== command.fingerprint) throw keyReused();
      return { kind: 'replay', response: known.response };
    }
    const { operation } = write.side;
    const db = this.dataSource.manager;
    const { leaseMs } = this.config.idempotency;
    if (this.provider.unavailableForMs(lease.clientId) === 0) {
      const askedAt = performance.now();
      const row = await write.claimAndCreatePending({ lease, fingerprint: command.fingerprint, leaseMs, orExpired: false });
      if (row) return { kind: 'leased', row, lease: heldSince(lease, askedAt, leaseMs) };
    }
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
          const row = await write.claimAndCreatePending({ lease, fingerprint: command.fingerprint, leaseMs, orExpired: true });
          if (row) return { kind: 'leased', row, lease: heldSince(lease, askedAt, leaseMs) };
          break;
        }
        case 'resumable': {
          const ref = { clientId: lease.clientId, id: verdict.resourceId };
          const waitMs = this.provider.unavailableForMs(lease.clientId);
          if (waitMs > 0) {
            // The provider may have acted on this row, so "nothing was
            // attempted" (503) would be false: the client learns the row as
            // it is. No lease is taken, so the row may have been decided
            // since the key was read: its key then holds the answer, and the
            // next round replays it.
            const row = await this.ledger.find(operation, ref);
            if (row?.status !== 'pending' && row?.status !== 'requires_review') break;
            return { kind: 'accepted', row, retryAfterSeconds: Math.ceil(waitMs / 1000) };
          }
          const askedAt = performance.now();
          if (!(await this.keys.takeOverLease(db, lease, operation, verdict.resourceId, leaseMs))) break;
          const row = await this.ledger.undecided(operation, ref);
          if (row.status === 'requires_review') {
            // Not ours to resume: the review re-check or a person decides it.
            await this.keys.release(db, lease);
            return { kind: 'accepted', row, retryAfterSeconds: IN_REVIEW_RETRY_AFTER_SECONDS };
          }
          this.logger.log({ msg: `resuming ${operation.name}`, [`${operation.name}Id`]: row.id });
          return { kind: 'leased', row, lease: heldSince(lease, askedAt, leaseMs) };
        }
      }
    }
    throw keyInUse();
  }

  /**
   * Phase 2 and 3. The provider is called only while the lease holds (see
   * Ledger.holdForCall): a request that stalled past it and was taken over
   * makes no call and answers with what the new holder stored. A definitive
   * answer is recorded; anything else (provider down, timeouts past the
   * deadline, an answer the provider still holds as pending) leaves the row
   * pending, releases the key so a retry resumes it at once, and answers
   * 202: the outcome is unknown, never guessed. An answer that disagrees
   * with the row (another amount) sends it to review: 202 as well.
   */
  private async callProvider<R extends OperationRow>(
    write: Write<R>,
    row: R,
    claimed: HeldLease,
    command: WriteCommand,
  ): Promise<HttpReply> {
    const { operation } = write.side;
    const lease = await this.ledger.holdForCall(claimed, this.config.provider.deadlineMs);
    if (!lease) return this.answerAfterLostLease(claimed);
    this.crashPoint.reach('during_provider_call', this.crashContext(write, row));
    const answer = await write.side.submit(this.provider, row, { clientId: row.clientId, requestId: command.requestId });
    this.crashPoint.reach('before_outcome', this.crashContext(write, row));
    const outcome = answer.kind === 'answered' ? answer.outcome : undefined;
    if (!outcome) {
      await this.keys.release(this.dataSource.manager, lease);
      return this.acceptedReply(write, row, PENDING_RETRY_AFTER_SECONDS);
    }
    // The retention the statement returns counts from its now(), which is after this.
    const askedAt = performance.now();
    const [written] = await this.ledger.recordOutcomes(operation, [{ lease, row, outcome }]);
    if (written.status === 'rejected') {
      // An answer that cannot be written is no answer: the row stays
      // pending, its key is released for a retry, and reconciliation's ladder
      // takes it from there (to review, if it never can be written). Should
      // Postgres itself be down, the release fails too and the request is a 5xx.
      this.logger.error({ msg: 'provider answer could not be recorded', [`${operation.name}Id`]: row.id, err: errorForLog(written.reason) });
      await this.keys.release(this.dataSource.manager, lease);
      return this.acceptedReply(write, row, PENDING_RETRY_AFTER_SECONDS);
    }
    const recorded = written.value;
    if (!recorded) return this.answerAfterLostLease(lease);
    if (!recorded.response || recorded.expiresInMs === undefined) {
      return this.acceptedReply(write, recorded.row, IN_REVIEW_RETRY_AFTER_SECONDS);
    }
    const stored = { fingerprint: command.fingerprint, response: recorded.response };
    this.answers.remember(lease.clientId, lease.key, stored, recorded.expiresInMs, askedAt);
    return { ...recorded.response, headers: {} };
  }

  /**
   * We held a definitive answer but our lease had been taken over. The new
   * holder works on the same row with the same provider key, so both
   * answers agree; replay its stored response if it has finished.
   */
  private async answerAfterLostLease(lease: Lease): Promise<HttpReply> {
    this.logger.warn({ msg: 'lease lost before the outcome was recorded', key: lease.key });
    const state = await this.keys.find(this.dataSource.manager, lease.clientId, lease.key);
    if (state?.response) return replayOf(state.response);
    throw keyInUse();
  }

  /** An undecided row as it is now: come back later, the same key will tell more. */
  private acceptedReply<R extends OperationRow>(write: Write<R>, row: R, retryAfterSeconds: number): HttpReply {
    return {
      status: 202,
      body: JSON.stringify(write.side.operation.resource(row)),
      headers: { 'Retry-After': String(retryAfterSeconds) },
    };
  }

  /**
   * Before any work: while the provider's circuit is open for this client (its
   * own, or the provider-wide one) nothing can succeed, so nothing is
   * claimed or written and the client learns when to come back. Replays were
   * answered already: they need no provider. Once a probe is due the circuit
   * lets the request through, and its call is the probe.
   */
  private refuseWhileProviderDown(clientId: string): void {
    const waitMs = this.provider.unavailableForMs(clientId);
    if (waitMs > 0) throw providerUnavailable(waitMs);
  }

  private crashContext<R extends OperationRow>(write: Write<R>, row: R): Record<string, string> {
    return { [`${write.side.operation.name}Id`]: row.id };
  }
}

/** The provider's circuit is open and nothing was attempted: come back when a probe may go. */
export function providerUnavailable(waitMs: number): DomainError {
  return new DomainError(
    ErrorCode.ProviderUnavailable,
    'The payment provider is unavailable; nothing was attempted. Retry later with the same Idempotency-Key.',
    { retryAfterSeconds: Math.ceil(waitMs / 1000) },
  );
}
