import { Module } from '@nestjs/common';
import { ApiKeyGuard } from './api-key.guard';
import { ClientsRepository } from './clients.repository';
import { ClientsService } from './clients.service';

@Module({
  providers: [ClientsRepository, ClientsService, ApiKeyGuard],
  exports: [ClientsService, ApiKeyGuard],
})
export class ClientsModule {}
