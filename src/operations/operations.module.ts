import { Module } from '@nestjs/common';
import { AnswerCache } from '../idempotency/answer-cache';
import { LedgerModule } from '../ledger/ledger.module';
import { ProviderModule } from '../provider/provider.module';
import { IdempotentWrites } from './idempotent-writes';

/**
 * The request side of every idempotent write: the claim, the provider call
 * and the fenced outcome, shared by the payment and refund routes. One
 * AnswerCache for both, as they share one key space per client.
 */
@Module({
  imports: [LedgerModule, ProviderModule],
  providers: [IdempotentWrites, AnswerCache],
  exports: [IdempotentWrites, AnswerCache],
})
export class OperationsModule {}
