import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type { HttpReply } from '../common/http-reply';
import { isUniqueViolation } from '../database/sql';
import type { KeyClaim } from '../ledger/idempotency.repository';
import { PaymentsRepository } from '../ledger/payments.repository';
import { ACTIVE_ORDER_INDEX, type Payment } from '../ledger/payments.table';
import { Metrics } from '../metrics/metrics';
import { IdempotentWrites, type Write, type WriteCommand } from '../operations/idempotent-writes';
import { PAYMENT_SIDE } from '../operations/provider-side';
import { newPendingPayment } from './payment';
import type { CreatePaymentDto } from './payments.dto';
import { orderAlreadyPaid } from './payments.errors';

export interface CreatePaymentCommand extends WriteCommand {
  body: CreatePaymentDto;
}

/**
 * POST /v1/payments: the idempotent write (IdempotentWrites) of a payment.
 * Its own part is phase 1, the key's claim and the pending payment in one
 * statement, refused when the order already has a payment that did not fail.
 */
@Injectable()
export class PaymentCreationService {
  constructor(
    private readonly dataSource: DataSource,
    private readonly payments: PaymentsRepository,
    private readonly writes: IdempotentWrites,
    private readonly metrics: Metrics,
  ) {}

  async create(command: CreatePaymentCommand): Promise<HttpReply> {
    const reply = await this.writes.run(this.paymentOf(command), command);
    this.countAnswer(reply);
    return reply;
  }

  /** payment_answers_total, for every answer given, whoever gives it: a replay answered before the framework too. */
  countAnswer(reply: HttpReply): void {
    const replayed = reply.headers['Idempotent-Replayed'] === 'true';
    this.metrics.paymentAnswers.inc({ status: String(reply.status), replayed: String(replayed) });
  }

  private paymentOf({ clientId, body }: CreatePaymentCommand): Write<Payment> {
    return {
      side: PAYMENT_SIDE,
      claimAndCreatePending: async (claim: KeyClaim) => {
        try {
          return await this.payments.insertPendingUnderClaim(this.dataSource.manager, newPendingPayment(clientId, body), claim);
        } catch (error) {
          if (isUniqueViolation(error, ACTIVE_ORDER_INDEX)) throw orderAlreadyPaid(body.order_id);
          throw error;
        }
      },
    };
  }
}
