import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import type { DataSource, EntityManager } from 'typeorm';
import { ClientsRepository } from '../../src/clients/clients.repository';
import { ClientsService } from '../../src/clients/clients.service';
import type { AppConfig } from '../../src/config/app-config';
import type { HttpReply } from '../../src/common/http-reply';
import { AnswerCache } from '../../src/idempotency/answer-cache';
import { keyInUse, keyReused } from '../../src/idempotency/idempotency.errors';
import { IdempotencyRepository } from '../../src/ledger/idempotency.repository';
import { type Lease, type StoredResponse } from '../../src/ledger/lease';
import { parseIdempotencyKey } from '../../src/idempotency/idempotency-key';
import { keyVerdict } from '../../src/idempotency/key-verdict';
import { decisionOf } from '../../src/ledger/ledger.service';
import { isUniqueViolation } from '../../src/database/sql';
import { newPendingPayment } from '../../src/payments/payment';
import { chargeInputFor } from '../../src/operations/provider-side';
import { toResource } from '../../src/ledger/payment-resource';
import { outcomeOfCharge } from '../../src/ledger/payment-outcome';
import { PaymentLookupService } from '../../src/payments/payment-lookup.service';
import type { CreatePaymentDto } from '../../src/payments/payments.dto';
import { orderAlreadyPaid } from '../../src/payments/payments.errors';
import { PAYMENTS } from '../../src/ledger/operations';
import { OperationsRepository } from '../../src/ledger/operations.repository';
import { PaymentsRepository } from '../../src/ledger/payments.repository';
import { ACTIVE_ORDER_INDEX, type Payment } from '../../src/ledger/payments.table';
import { type ProviderCharge, parseProviderCharge } from '../../src/provider/provider-charge';
import type { ChargeInput } from '../../src/provider/provider.client';

/**
 * The floor's payment flow: the service's statements, from the service's own
 * repositories, in the order PaymentCreationService and the Ledger send them,
 * with plain `pg` underneath instead of TypeORM and Nest. This is the one
 * file to follow when main changes the create path (statements merged, a
 * cache added): the floor is only a floor while it does what the service does.
 *
 * Left out, because the bench never reaches them: resuming an abandoned key
 * and answering after a lost lease (the floor answers 409 instead),
 * in-request provider retries, the circuit breaker and the lease renewal
 * before the call (a fresh lease always outlasts the provider deadline, so
 * the service sends no statement there either).
 */

/**
 * What the repositories call on an EntityManager: `query(text, params)`,
 * answered with the rows (queryRows takes rows or TypeORM's [rows, count]).
 */
function managerOver(runner: Pool): EntityManager {
  const query = async (text: string, params?: unknown[]) => (await runner.query(text, params)).rows;
  return { query } as unknown as EntityManager;
}

export interface FloorCreate {
  clientId: string;
  idempotencyKeyHeader: string | string[] | undefined;
  fingerprint: string;
  body: CreatePaymentDto;
  requestId: string;
}

/** As in PaymentCreationService. */
const MAX_CLAIM_ROUNDS = 3;
const PENDING_RETRY_AFTER_SECONDS = 2;
const IN_REVIEW_RETRY_AFTER_SECONDS = 60;

function replayOf(response: StoredResponse): HttpReply {
  return { ...response, headers: { 'Idempotent-Replayed': 'true' } };
}

function accepted(payment: Payment, retryAfterSeconds: number): HttpReply {
  return { status: 202, body: JSON.stringify(toResource(payment)), headers: { 'Retry-After': String(retryAfterSeconds) } };
}

export class FloorPayments {
  private readonly db: EntityManager;
  private readonly keys = new IdempotencyRepository();
  private readonly payments = new PaymentsRepository();
  private readonly operations = new OperationsRepository();
  private readonly answers: AnswerCache;
  /** The service's own authentication (and its cache) and reads, over the same adapter: nothing of theirs is framework. */
  readonly clients: ClientsService;
  readonly lookup: PaymentLookupService;

  constructor(
    private readonly pool: Pool,
    private readonly config: AppConfig,
  ) {
    this.db = managerOver(pool);
    const dataSource = { manager: this.db } as DataSource;
    this.clients = new ClientsService(new ClientsRepository(dataSource), config.authCache);
    this.answers = new AnswerCache(config);
    this.lookup = new PaymentLookupService(dataSource, this.payments);
  }

  /** The answer cache, the key read, then a claim with the pending payment, the provider call, and the outcome. */
  async create(command: FloorCreate): Promise<HttpReply> {
    const key = parseIdempotencyKey(command.idempotencyKeyHeader);
    const lease: Lease = { clientId: command.clientId, key, token: randomUUID() };
    const known = this.answers.get(lease.clientId, key);
    if (known) {
      if (known.fingerprint !== command.fingerprint) throw keyReused();
      return replayOf(known.response);
    }
    for (let round = 0; round < MAX_CLAIM_ROUNDS; round++) {
      const askedAt = performance.now();
      const state = await this.keys.find(this.db, lease.clientId, key);
      if (state?.response && state.expiresInMs !== null) {
        this.answers.remember(lease.clientId, key, { fingerprint: state.fingerprint, response: state.response }, state.expiresInMs, askedAt);
      }
      const verdict = keyVerdict(state, command.fingerprint);
      switch (verdict.kind) {
        case 'replay':
          return replayOf(verdict.response);
        case 'reused':
          throw keyReused();
        case 'in_progress':
        case 'resumable':
          throw keyInUse();
        case 'new': {
          const payment = await this.claimAndCreatePending(command, lease);
          if (payment) return this.charge(payment, lease, command);
        }
      }
    }
    throw keyInUse();
  }

  /** Phase 1 in one statement, as the service sends it: no transaction to open. */
  private async claimAndCreatePending(command: FloorCreate, lease: Lease): Promise<Payment | undefined> {
    const { body } = command;
    try {
      return await this.payments.insertPendingUnderClaim(
        this.db,
        newPendingPayment(command.clientId, body),
        { lease, fingerprint: command.fingerprint, leaseMs: this.config.idempotency.leaseMs },
      );
    } catch (error) {
      if (isUniqueViolation(error, ACTIVE_ORDER_INDEX)) throw orderAlreadyPaid(body.order_id);
      throw error;
    }
  }

  /** Ledger.recordOutcome: the fenced transition, its event and the key's answer, in one statement. */
  private async charge(payment: Payment, lease: Lease, command: FloorCreate): Promise<HttpReply> {
    const charge = await this.callProvider(chargeInputFor(payment), command.requestId);
    const outcome = charge && outcomeOfCharge(charge, payment);
    if (!outcome) {
      await this.keys.release(this.db, lease);
      return accepted(payment, PENDING_RETRY_AFTER_SECONDS);
    }
    const askedAt = performance.now();
    const decision = decisionOf(PAYMENTS, payment, outcome, this.config);
    const decided = await this.operations.recordOutcomeUnderLease(this.db, PAYMENTS, lease, payment, decision);
    if (decided.kind === 'lease_lost') throw keyInUse();
    if (decided.kind === 'not_undecided') throw new Error(`payment ${payment.id} is already final under a live lease`);
    if (!decided.response || decided.expiresInMs === undefined) return accepted(decided.row, IN_REVIEW_RETRY_AFTER_SECONDS);
    const answer = { fingerprint: command.fingerprint, response: decided.response };
    this.answers.remember(lease.clientId, lease.key, answer, decided.expiresInMs, askedAt);
    return { ...decided.response, headers: {} };
  }

  /** ProviderClient's request, byte for byte in what it sends; one attempt. Undefined: no usable answer. */
  private async callProvider(input: ChargeInput, requestId: string): Promise<ProviderCharge | undefined> {
    const { url, timeoutMs, deadlineMs } = this.config.provider;
    const attemptMs = Math.min(timeoutMs, deadlineMs);
    try {
      const response = await fetch(`${url}/charges`, {
        method: 'POST',
        headers: {
          Accept: 'application/json',
          'X-Request-Deadline-Ms': String(attemptMs),
          'Content-Type': 'application/json',
          'Idempotency-Key': input.providerKey,
          'X-Request-Id': requestId,
        },
        body: JSON.stringify({
          amount: input.amount,
          currency: input.currency,
          payment_method: input.paymentMethod,
          reference: input.reference,
        }),
        signal: AbortSignal.timeout(attemptMs),
        redirect: 'manual',
      });
      if (!response.ok) {
        await response.body?.cancel();
        return undefined;
      }
      return parseProviderCharge(await response.json());
    } catch {
      return undefined;
    }
  }
}
