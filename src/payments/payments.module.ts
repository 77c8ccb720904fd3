import { Module } from '@nestjs/common';
import { ClientsModule } from '../clients/clients.module';
import { LedgerModule } from '../ledger/ledger.module';
import { OperationsModule } from '../operations/operations.module';
import { PaymentCreationService } from './payment-creation.service';
import { PaymentLookupService } from './payment-lookup.service';
import { PaymentsController } from './payments.controller';

/** The API's payment routes: authentication, rate limit, the create flow and the read side. */
@Module({
  imports: [ClientsModule, LedgerModule, OperationsModule],
  controllers: [PaymentsController],
  providers: [PaymentCreationService, PaymentLookupService],
})
export class PaymentsModule {}
