import { Module } from '@nestjs/common';
import { IdempotencyRepository } from './idempotency.repository';
import { OperationsRepository } from './operations.repository';
import { PaymentsRepository } from './payments.repository';
import { RefundsRepository } from './refunds.repository';
import { Ledger } from './ledger.service';

/**
 * The core every process shares: the tables payments and refunds live in,
 * the outbox their changes write to, and the fenced transitions over them. No HTTP: the
 * worker imports this, not the payments module with its controller and guards.
 */
@Module({
  providers: [IdempotencyRepository, OperationsRepository, PaymentsRepository, RefundsRepository, Ledger],
  exports: [IdempotencyRepository, OperationsRepository, PaymentsRepository, RefundsRepository, Ledger],
})
export class LedgerModule {}
