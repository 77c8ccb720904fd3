import { type DynamicModule, Module } from '@nestjs/common';
import type { AppConfig } from '../config/app-config';
import { ConfigModule } from '../config/config.module';
import { DatabaseModule } from '../database/database.module';
import { LedgerModule } from '../ledger/ledger.module';
import { MetricsModule } from '../metrics/metrics.module';
import { ProviderModule } from '../provider/provider.module';
import { ResolutionService } from './resolution.service';

/** What the operator commands need: the ledger and the provider, no HTTP and no queue. */
@Module({})
export class OperatorModule {
  static forRoot(config: AppConfig): DynamicModule {
    return {
      module: OperatorModule,
      imports: [ConfigModule.forRoot(config), DatabaseModule, MetricsModule, LedgerModule, ProviderModule],
      providers: [ResolutionService],
    };
  }
}
