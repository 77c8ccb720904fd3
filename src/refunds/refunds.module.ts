import { Module } from '@nestjs/common';
import { ClientsModule } from '../clients/clients.module';
import { LedgerModule } from '../ledger/ledger.module';
import { OperationsModule } from '../operations/operations.module';
import { RefundsController } from './refunds.controller';
import { RefundsService } from './refunds.service';

/** The API's refund routes, on the machinery the payment routes use. */
@Module({
  imports: [ClientsModule, LedgerModule, OperationsModule],
  controllers: [RefundsController],
  providers: [RefundsService],
})
export class RefundsModule {}
