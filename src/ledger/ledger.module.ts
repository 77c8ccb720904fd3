import { Module } from '@nestjs/common';
import { IdempotencyRepository } from './idempotency.repository';
import { PaymentsRepository } from './payments.repository';
import { Ledger } from './ledger.service';

/**
 * The core every process shares: the tables a payment lives in, the outbox
 * its changes write to, and the fenced transitions over them. No HTTP: the
 * worker imports this, not the payments module with its controller and guards.
 */
@Module({
  providers: [IdempotencyRepository, PaymentsRepository, Ledger],
  exports: [IdempotencyRepository, PaymentsRepository, Ledger],
})
export class LedgerModule {}
