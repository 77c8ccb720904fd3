import { BullModule } from '@nestjs/bullmq';
import { Module } from '@nestjs/common';
import type { AppConfig } from '../config/app-config';
import { APP_CONFIG } from '../config/app-config';
import { ClientsRepository } from '../clients/clients.repository';
import { LedgerModule } from '../ledger/ledger.module';
import { ProviderModule } from '../provider/provider.module';
import { RECONCILIATION_QUEUE } from './reconciliation.constants';
import { ReconciliationProcessor, reconciliationProcessorFor } from './reconciliation.processor';
import { ReconciliationScheduler } from './reconciliation.scheduler';
import { ReconciliationService } from './reconciliation.service';

@Module({
  imports: [
    BullModule.registerQueue({ name: RECONCILIATION_QUEUE }),
    LedgerModule,
    ProviderModule,
  ],
  providers: [
    ClientsRepository,
    ReconciliationService,
    {
      provide: ReconciliationProcessor,
      inject: [ReconciliationService, APP_CONFIG],
      useFactory: (service: ReconciliationService, config: AppConfig) =>
        new (reconciliationProcessorFor(config))(service),
    },
    ReconciliationScheduler,
  ],
  // The queue, for the worker's gauges (SafetyNetGauges) to count its jobs.
  exports: [BullModule],
})
export class ReconciliationModule {}
