import { Injectable, Logger } from '@nestjs/common';
import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import { DataSource } from 'typeorm';
import { DomainError, ErrorCode } from '../common/domain-error';
import type { AppConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import { Ledger } from '../ledger/ledger.service';
import type { Operation, OperationRow } from '../ledger/operation';
import { PAYMENTS, REFUNDS } from '../ledger/operations';
import { OperationsRepository } from '../ledger/operations.repository';
import type { FinalOutcome } from '../ledger/outcome';
import { outcomeOfCharge } from '../ledger/payment-outcome';
import type { Payment } from '../ledger/payments.table';
import { outcomeOfRefund } from '../ledger/refund-outcome';
import type { Refund } from '../ledger/refunds.table';
import { Metrics } from '../metrics/metrics';
import { type ProviderEvent, isChargeEvent, parseProviderEvent } from './provider-event';
import { ProcessedMessagesRepository } from './processed-messages.repository';

/** The consumer name under which provider events are recorded as processed. */
const CONSUMER = 'provider-events';
/** A payment busy with a request or the worker frees up within a lease; the provider retries with backoff anyway. */
const BUSY_RETRY_AFTER_SECONDS = 1;

export type EventResult = 'applied' | 'noted' | 'duplicate' | 'stale' | 'unknown_charge' | 'unknown_refund';

/** What an event is about, read for one operation: its row's provider key, the version, and what it means for the row. */
interface Subject<R extends OperationRow> {
  operation: Operation<R>;
  providerKey: string;
  version: number;
  outcomeFor(row: R): FinalOutcome | undefined;
  unknown: EventResult;
}

function subjectOf(event: ProviderEvent): Subject<Payment> | Subject<Refund> {
  const { providerKey, version } = event.data;
  if (isChargeEvent(event)) {
    const { charge } = event.data;
    return { operation: PAYMENTS, providerKey, version, outcomeFor: (payment: Payment) => outcomeOfCharge(charge, payment), unknown: 'unknown_charge' };
  }
  const { refund } = event.data;
  return { operation: REFUNDS, providerKey, version, outcomeFor: (row: Refund) => outcomeOfRefund(refund, row), unknown: 'unknown_refund' };
}

/**
 * Consumes the provider's charge and refund events, delivered at least once
 * and in any order, so that each has its effect at most once: in ONE
 * transaction the message is recorded as processed (a duplicate finds its
 * row), the provider object's version is moved forward (an older event finds
 * a newer version), and a final answer moves its undecided payment or refund
 * through the ledger's fenced transition, storing the final response on the
 * key. The caller answers 2xx only after that commit, so an event whose
 * effect did not commit comes again. Charges and refunds take the same path,
 * each with its operation (see Subject).
 *
 * An event names its object by provider key, not by client: the row is found
 * by that key first, outside the transaction (on a schema sharded by client,
 * the one statement here that asks every shard), and the transaction then
 * names the row's client in every statement, so it runs on one shard. An
 * event for no row of ours is recorded nowhere and changes nothing, however
 * often it comes.
 */
@Injectable()
export class ProviderEventsService {
  private readonly logger = new Logger(ProviderEventsService.name);
  private readonly webhook: Webhook;

  constructor(
    private readonly dataSource: DataSource,
    private readonly messages: ProcessedMessagesRepository,
    private readonly rows: OperationsRepository,
    private readonly ledger: Ledger,
    private readonly metrics: Metrics,
    @InjectConfig() config: AppConfig,
  ) {
    this.webhook = new Webhook(config.providerEvents.secret);
  }

  /**
   * Verifies the Standard Webhooks signature over the exact bytes received
   * (and the timestamp, within five minutes) before anything is read or written.
   *
   * `body` is what the API's JSON parser made of those bytes, with every check
   * a request body gets (duplicate keys, depth, characters Postgres refuses);
   * the library is not let parse them again. Its `JSON.parse` and the API's
   * parser disagree on some bodies: a byte-order mark the parser skips made
   * `JSON.parse` throw after the signature verified, a 500, where one reading
   * of the bytes answers such a body like any other.
   */
  async receive(signedBytes: Buffer | undefined, body: unknown, headers: Record<string, string | string[] | undefined>): Promise<EventResult> {
    const signed = singleValued(headers);
    try {
      this.webhook.verify(signedBytes ?? Buffer.alloc(0), signed, { jsonParse: false });
    } catch (error) {
      if (!(error instanceof WebhookVerificationError)) throw error;
      this.metrics.providerEvents.inc({ result: 'rejected' });
      throw new DomainError(ErrorCode.WebhookSignatureInvalid, `The event's signature does not verify: ${error.message}.`);
    }
    const event = parseProviderEvent(body);
    // The signature covers webhook-id; the processed record is keyed by the event's id: they must be one.
    if (signed['webhook-id'] !== event.id) {
      throw new DomainError(ErrorCode.ParameterInvalid, 'webhook-id is not the id of the event it carries.', {
        param: 'webhook-id',
      });
    }
    const subject = subjectOf(event);
    const result = await this.consume(event.id, subject as Subject<OperationRow>);
    this.metrics.providerEvents.inc({ result });
    return result;
  }

  private async consume<R extends OperationRow>(eventId: string, subject: Subject<R>): Promise<EventResult> {
    const { operation, providerKey } = subject;
    const ref = await this.rows.findByProviderKey(this.dataSource.manager, operation, providerKey);
    if (!ref) return subject.unknown;
    return this.dataSource.transaction(async (db): Promise<EventResult> => {
      if (!(await this.messages.record(db, ref.clientId, CONSUMER, eventId))) return 'duplicate';
      const row = await this.rows.findForClient(db, operation, ref);
      if (!row) throw new Error(`${operation.name} ${ref.id} of provider key ${providerKey} is gone`);
      const outcome = subject.outcomeFor(row);
      // An answer for another amount is never taken from an event: reconciliation sends it to review.
      const final = outcome && outcome.status !== 'requires_review' ? outcome : undefined;
      const result = await this.ledger.applyProviderEvent(db, operation, row, { version: subject.version, outcome: final });
      if (result === 'busy') {
        // Rolls back the processed record with everything else: the redelivery applies it.
        throw new DomainError(ErrorCode.PaymentBusy, `The ${operation.name} is being worked on; deliver the event again.`, {
          retryAfterSeconds: BUSY_RETRY_AFTER_SECONDS,
        });
      }
      if (result === 'applied') {
        this.logger.log({ msg: `${operation.name} settled by a provider event`, [`${operation.name}Id`]: row.id, status: final?.status });
      }
      return result;
    });
  }
}

/** Standard Webhooks headers are single-valued; a repeated one is taken as its first value. */
function singleValued(headers: Record<string, string | string[] | undefined>): Record<string, string> {
  return Object.fromEntries(
    Object.entries(headers).flatMap(([name, value]) => {
      const first = Array.isArray(value) ? value[0] : value;
      return first === undefined ? [] : [[name, first]];
    }),
  );
}
