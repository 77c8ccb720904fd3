import { Injectable } from '@nestjs/common';
import { DomainError, ErrorCode } from '../common/domain-error';
import { generateApiKey, hashApiKey, isApiKeyShaped } from './api-key';
import { unauthenticated } from './clients.errors';
import { ClientsRepository } from './clients.repository';
import type { ApiClient } from './clients.table';

@Injectable()
export class ClientsService {
  constructor(private readonly clients: ClientsRepository) {}

  /** Creates a client; the returned key is the only copy there will ever be. */
  async create(name: string): Promise<ApiClient & { api_key: string }> {
    if (name.length < 1 || name.length > 100) {
      throw new DomainError(ErrorCode.ParameterInvalid, 'name must be 1 to 100 characters', { param: 'name' });
    }
    const apiKey = generateApiKey();
    const client = await this.clients.create(name, hashApiKey(apiKey));
    return { ...client, api_key: apiKey };
  }

  /** Only a header holding a key of the shape we issue costs a database lookup. */
  async authenticate(authorization: string | undefined): Promise<ApiClient> {
    const match = /^bearer (\S+)$/i.exec(authorization?.trim() ?? '');
    const client = match && isApiKeyShaped(match[1]) ? await this.clients.findByKeyHash(hashApiKey(match[1])) : undefined;
    if (!client) throw unauthenticated();
    return client;
  }
}
