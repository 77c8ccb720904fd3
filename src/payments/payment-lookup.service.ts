import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { type PaymentList } from './payment';
import { PAYMENT_ID_PATTERN } from '../ledger/payment-id';
import { type PaymentResource, toResource } from '../ledger/payment-resource';
import { paymentNotFound, unknownCursor } from './payments.errors';
import { PaymentsRepository } from '../ledger/payments.repository';

/** The read side: one payment, or a page of them, always scoped to the client asking. */
@Injectable()
export class PaymentLookupService {
  constructor(
    private readonly dataSource: DataSource,
    private readonly payments: PaymentsRepository,
  ) {}

  async get(clientId: string, id: string): Promise<PaymentResource> {
    // Anything else names no payment (and may hold what Postgres text refuses, such as U+0000).
    if (!PAYMENT_ID_PATTERN.test(id)) throw paymentNotFound(id);
    const payment = await this.payments.findForClient(this.dataSource.manager, clientId, id);
    if (!payment) throw paymentNotFound(id);
    return toResource(payment);
  }

  async list(clientId: string, page: { limit?: number; startingAfter?: string }): Promise<PaymentList> {
    const db = this.dataSource.manager;
    if (page.startingAfter !== undefined && !(await this.payments.findForClient(db, clientId, page.startingAfter))) {
      throw unknownCursor(page.startingAfter);
    }
    const result = await this.payments.listForClient(db, clientId, {
      limit: page.limit ?? 10,
      startingAfter: page.startingAfter,
    });
    return { object: 'list', data: result.payments.map((payment) => toResource(payment)), has_more: result.hasMore };
  }
}
