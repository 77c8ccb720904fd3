import { randomUUID } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type { AppConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import { IdempotencyRepository } from '../ledger/idempotency.repository';
import type { Lease } from '../ledger/lease';
import { Ledger } from '../ledger/ledger.service';
import { type PaymentResource, toResource } from '../ledger/payment-resource';
import { type FinalOutcome, outcomeOfCharge } from '../ledger/payment-outcome';
import { PaymentsRepository } from '../ledger/payments.repository';
import type { Payment } from '../ledger/payments.table';
import { ProviderClient } from '../provider/provider.client';

export interface ResolveCommand {
  paymentId: string;
  status: 'succeeded' | 'failed';
  reason: string;
  /** Who resolves: recorded on the payment with the reason. */
  by: string;
}

/** Why a resolution was refused; each leaves the payment exactly as it was. */
export type Refusal =
  | 'payment_not_found'
  | 'not_in_review'
  | 'payment_busy'
  | 'provider_unreachable'
  | 'provider_pending'
  | 'provider_charge_mismatch'
  | 'provider_contradicts'
  | 'provider_never_charged';

export type ResolveResult =
  | { resolved: true; payment: PaymentResource }
  | { resolved: false; refusal: Refusal; message: string; payment?: PaymentResource };

/**
 * An operator's resolution of a payment in review, through the same fenced
 * transition as every other writer. The provider is asked first, under the
 * payment's lease so that nobody acts between the answer and the write, and
 * its answer wins: a resolution that contradicts a final charge, or calls a
 * charge the provider never received succeeded, is refused. A charge the
 * provider never received may be resolved failed: with the lease fence, no
 * stalled request or worker can send it afterwards.
 */
@Injectable()
export class ResolutionService {
  constructor(
    private readonly dataSource: DataSource,
    private readonly keys: IdempotencyRepository,
    private readonly payments: PaymentsRepository,
    private readonly ledger: Ledger,
    private readonly provider: ProviderClient,
    @InjectConfig() private readonly config: AppConfig,
  ) {}

  async resolve(command: ResolveCommand): Promise<ResolveResult> {
    const db = this.dataSource.manager;
    const payment = await this.payments.findById(db, command.paymentId);
    if (!payment) return refuse('payment_not_found', `No payment ${command.paymentId}.`);
    if (payment.status !== 'requires_review') {
      return refuse('not_in_review', `The payment is ${payment.status}; only a payment in review is resolved.`, payment);
    }
    const lease = await this.keys.takeOverLeaseForPayment(db, payment, randomUUID(), this.config.idempotency.leaseMs);
    if (!lease) return refuse('payment_busy', 'A request or the worker is on this payment now; try again.', payment);
    const decision = await this.decide(payment, command);
    if ('refusal' in decision) {
      await this.keys.release(db, lease);
      return decision;
    }
    return this.record(lease, payment, decision.outcome);
  }

  /** What the provider's answer allows. */
  private async decide(payment: Payment, command: ResolveCommand): Promise<{ outcome: FinalOutcome } | ResolveResult & { resolved: false }> {
    const resolution = { by: command.by, reason: command.reason };
    const lookup = await this.provider.getCharge(payment.providerKey, {
      clientId: payment.clientId,
      deadlineMs: this.config.provider.deadlineMs,
    });
    switch (lookup.kind) {
      case 'unknown':
        return refuse('provider_unreachable', `The provider could not be asked (${lookup.reason}).`, payment);
      case 'not_found':
        if (command.status === 'succeeded') {
          return refuse('provider_never_charged', 'The provider never received this charge: it cannot have succeeded.', payment);
        }
        return {
          outcome: {
            status: 'failed',
            providerChargeId: null,
            failureCode: 'review_resolved_failed',
            failureMessage: 'The payment failed after review.',
            resolution,
          },
        };
      case 'found': {
        const outcome = outcomeOfCharge(lookup.charge, payment);
        if (!outcome) return refuse('provider_pending', 'The provider still holds the charge as pending.', payment);
        if (outcome.status === 'requires_review') {
          return refuse('provider_charge_mismatch', outcome.failureMessage, payment);
        }
        if (outcome.status !== command.status) {
          return refuse('provider_contradicts', `The provider's charge ${lookup.charge.id} ${outcome.status}.`, payment);
        }
        return { outcome: { ...outcome, resolution } };
      }
    }
  }

  private async record(lease: Lease, payment: Payment, outcome: FinalOutcome): Promise<ResolveResult> {
    const recorded = await this.ledger.recordOutcome(lease, payment, outcome);
    if (!recorded) return refuse('payment_busy', 'The lease was lost while resolving; try again.', payment);
    return { resolved: true, payment: toResource(recorded.payment) };
  }
}

function refuse(refusal: Refusal, message: string, payment?: Payment): ResolveResult & { resolved: false } {
  return { resolved: false, refusal, message, ...(payment && { payment: toResource(payment) }) };
}
