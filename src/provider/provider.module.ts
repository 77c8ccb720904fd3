import { Module } from '@nestjs/common';
import { ProviderClient } from './provider.client';

/** The payment provider client; needs ConfigModule.forRoot() (global) in the app. */
@Module({
  providers: [ProviderClient],
  exports: [ProviderClient],
})
export class ProviderModule {}
