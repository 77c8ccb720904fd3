import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { DomainError, ErrorCode } from '../common/domain-error';
import type { HttpReply } from '../common/http-reply';
import type { KeyClaim } from '../ledger/idempotency.repository';
import { newRefundId, providerRefundKeyFor, REFUND_ID_PATTERN } from '../ledger/refund-id';
import { type RefundResource, toRefundResource } from '../ledger/refund-resource';
import { REFUNDS } from '../ledger/operations';
import { OperationsRepository } from '../ledger/operations.repository';
import { RefundsRepository } from '../ledger/refunds.repository';
import type { Refund } from '../ledger/refunds.table';
import { IdempotentWrites, type Write, type WriteCommand } from '../operations/idempotent-writes';
import { REFUND_SIDE } from '../operations/provider-side';
import type { RefundList } from './refund';
import type { CreateRefundDto } from './refunds.dto';

export interface CreateRefundCommand extends WriteCommand {
  body: CreateRefundDto;
}

/**
 * POST and GET /v1/refunds. A refund is the same idempotent write as a
 * payment (IdempotentWrites); its own part is phase 1, the key's claim, the
 * reservation of its amount under the payment's lock and the pending
 * refund, in one statement of one transaction
 * (RefundsRepository.insertPendingUnderClaim).
 */
@Injectable()
export class RefundsService {
  constructor(
    private readonly dataSource: DataSource,
    private readonly refunds: RefundsRepository,
    private readonly rows: OperationsRepository,
    private readonly writes: IdempotentWrites,
  ) {}

  create(command: CreateRefundCommand): Promise<HttpReply> {
    return this.writes.run(this.refundOf(command), command);
  }

  private refundOf({ clientId, body }: CreateRefundCommand): Write<Refund> {
    return {
      side: REFUND_SIDE,
      claimAndCreatePending: async (claim: KeyClaim) => {
        const id = newRefundId();
        return this.refunds.insertPendingUnderClaim(
          this.dataSource.manager,
          {
            id,
            clientId,
            paymentId: body.payment,
            amount: body.amount,
            reason: body.reason ?? null,
            metadata: body.metadata ?? {},
            providerKey: providerRefundKeyFor(id),
          },
          claim,
        );
      },
    };
  }

  async get(clientId: string, id: string): Promise<RefundResource> {
    if (!REFUND_ID_PATTERN.test(id)) throw refundNotFound(id);
    const refund = await this.rows.findForClient(this.dataSource.manager, REFUNDS, { clientId, id });
    if (!refund) throw refundNotFound(id);
    return toRefundResource(refund);
  }

  async list(clientId: string, page: { limit?: number; startingAfter?: string; paymentId?: string }): Promise<RefundList> {
    const db = this.dataSource.manager;
    if (page.startingAfter !== undefined && !(await this.rows.findForClient(db, REFUNDS, { clientId, id: page.startingAfter }))) {
      throw new DomainError(ErrorCode.ParameterInvalid, `No refund ${page.startingAfter}.`, { param: 'starting_after' });
    }
    const result = await this.refunds.listForClient(db, clientId, {
      limit: page.limit ?? 10,
      startingAfter: page.startingAfter,
      paymentId: page.paymentId,
    });
    return { object: 'list', data: result.refunds.map((refund) => toRefundResource(refund)), has_more: result.hasMore };
  }
}

/** Names the id only when it is one: a client's arbitrary path is not echoed back. */
function refundNotFound(id: string): DomainError {
  const message = REFUND_ID_PATTERN.test(id) ? `No refund ${id}.` : 'No such refund.';
  return new DomainError(ErrorCode.NotFound, message, { param: 'id' });
}
