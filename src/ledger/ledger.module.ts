import { Module } from '@nestjs/common';
import { IdempotencyRepository } from '../idempotency/idempotency.repository';
import { PaymentsRepository } from '../payments/payments.repository';
import { Ledger } from './ledger.service';

/**
 * The core both processes share: the two tables a payment lives in and the
 * fenced transitions over them. No HTTP: the worker imports this, not the
 * payments module with its controller and guards.
 */
@Module({
  providers: [IdempotencyRepository, PaymentsRepository, Ledger],
  exports: [IdempotencyRepository, PaymentsRepository, Ledger],
})
export class LedgerModule {}
