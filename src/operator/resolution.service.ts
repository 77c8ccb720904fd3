import { randomUUID } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type { AppConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import { IdempotencyRepository } from '../ledger/idempotency.repository';
import type { Lease } from '../ledger/lease';
import { Ledger } from '../ledger/ledger.service';
import type { OperationName, OperationRow } from '../ledger/operation';
import type { FinalOutcome } from '../ledger/outcome';
import { PaymentsRepository } from '../ledger/payments.repository';
import { RefundsRepository } from '../ledger/refunds.repository';
import { PROVIDER_SIDES, type ProviderSide } from '../operations/provider-side';
import { ProviderClient } from '../provider/provider.client';

export interface ResolveCommand {
  /** What is resolved: a payment (payment:resolve) or a refund (refund:resolve). */
  operation: OperationName;
  id: string;
  status: 'succeeded' | 'failed';
  reason: string;
  /** Who resolves: recorded on the row with the reason. */
  by: string;
}

/**
 * Why a resolution was refused; each leaves the row exactly as it was. The
 * names carry the operation where it matters (`payment_not_found`,
 * `refund_not_found`; `provider_never_charged`, `provider_never_refunded`).
 */
export type Refusal =
  | `${OperationName}_not_found`
  | 'not_in_review'
  | `${OperationName}_busy`
  | 'provider_unreachable'
  | 'provider_pending'
  | `provider_${'charge' | 'refund'}_mismatch`
  | 'provider_contradicts'
  | `provider_never_${'charged' | 'refunded'}`;

/** The result, with the row as the API shows it under the operation's name (`payment` or `refund`). */
export type ResolveResult =
  | ({ resolved: true } & Partial<Record<OperationName, object>>)
  | ({ resolved: false; refusal: Refusal; message: string } & Partial<Record<OperationName, object>>);

type Refused = ResolveResult & { resolved: false };

/** How each operation's refusals read. */
const WORDS = {
  payment: { object: 'charge', never: 'provider_never_charged', mismatch: 'provider_charge_mismatch' },
  refund: { object: 'refund', never: 'provider_never_refunded', mismatch: 'provider_refund_mismatch' },
} as const;

/**
 * An operator's resolution of a payment or a refund in review, through the
 * same fenced transition as every other writer. The provider is asked first,
 * under the row's lease so that nobody acts between the answer and the
 * write, and its answer wins: a resolution that contradicts a final answer,
 * or calls something the provider never received succeeded, is refused.
 * Something the provider never received may be resolved failed: with the
 * lease fence, no stalled request or worker can send it afterwards.
 */
@Injectable()
export class ResolutionService {
  constructor(
    private readonly dataSource: DataSource,
    private readonly keys: IdempotencyRepository,
    private readonly payments: PaymentsRepository,
    private readonly refunds: RefundsRepository,
    private readonly ledger: Ledger,
    private readonly provider: ProviderClient,
    @InjectConfig() private readonly config: AppConfig,
  ) {}

  async resolve(command: ResolveCommand): Promise<ResolveResult> {
    const side = PROVIDER_SIDES[command.operation];
    const { name } = side.operation;
    const db = this.dataSource.manager;
    const row: OperationRow | undefined =
      name === 'payment' ? await this.payments.findById(db, command.id) : await this.refunds.findById(db, command.id);
    if (!row) return refuse(side, `${name}_not_found`, `No ${name} ${command.id}.`);
    if (row.status !== 'requires_review') {
      return refuse(side, 'not_in_review', `The ${name} is ${row.status}; only a ${name} in review is resolved.`, row);
    }
    const lease = await this.keys.takeOverLeaseFor(db, side.operation, row, randomUUID(), this.config.idempotency.leaseMs);
    if (!lease) return refuse(side, `${name}_busy`, `A request or the worker is on this ${name} now; try again.`, row);
    const decision = await this.decide(side, row, command);
    if ('refusal' in decision) {
      await this.keys.release(db, lease);
      return decision;
    }
    return this.record(side, lease, row, decision.outcome);
  }

  /** What the provider's answer allows. */
  private async decide(
    side: ProviderSide<OperationRow>,
    row: OperationRow,
    command: ResolveCommand,
  ): Promise<{ outcome: FinalOutcome } | Refused> {
    const { name } = side.operation;
    const words = WORDS[name];
    const resolution = { by: command.by, reason: command.reason };
    const lookup = await side.lookup(this.provider, row, { clientId: row.clientId, deadlineMs: this.config.provider.deadlineMs });
    switch (lookup.kind) {
      case 'unknown':
        return refuse(side, 'provider_unreachable', `The provider could not be asked (${lookup.reason}).`, row);
      case 'not_found':
        if (command.status === 'succeeded') {
          return refuse(side, words.never, `The provider never received this ${words.object}: it cannot have succeeded.`, row);
        }
        return {
          outcome: {
            status: 'failed',
            providerId: null,
            failureCode: 'review_resolved_failed',
            failureMessage: `The ${name} failed after review.`,
            resolution,
          },
        };
      case 'found': {
        const { outcome } = lookup;
        if (!outcome) return refuse(side, 'provider_pending', `The provider still holds the ${words.object} as pending.`, row);
        if (outcome.status === 'requires_review') return refuse(side, words.mismatch, outcome.failureMessage, row);
        if (outcome.status !== command.status) {
          return refuse(side, 'provider_contradicts', `The provider's ${words.object} ${outcome.providerId} ${outcome.status}.`, row);
        }
        return { outcome: { ...outcome, resolution } };
      }
    }
  }

  private async record(side: ProviderSide<OperationRow>, lease: Lease, row: OperationRow, outcome: FinalOutcome): Promise<ResolveResult> {
    const recorded = await this.ledger.recordOutcome(side.operation, lease, row, outcome);
    const { name } = side.operation;
    if (!recorded) return refuse(side, `${name}_busy`, 'The lease was lost while resolving; try again.', row);
    return { resolved: true, [name]: side.operation.resource(recorded.row) };
  }
}

function refuse(side: ProviderSide<OperationRow>, refusal: Refusal, message: string, row?: OperationRow): Refused {
  return { resolved: false, refusal, message, ...(row && { [side.operation.name]: side.operation.resource(row) }) };
}
