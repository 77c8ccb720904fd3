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

  /**
   * Every copy of the Authorization header, as sent: Node keeps only the first
   * in `headers`, so two credentials would authenticate as whichever came
   * first. Two are refused like a wrong one (401, checked before any lookup):
   * a request must say unambiguously who it is. Only a key of the shape we
   * issue costs a database lookup.
   */
  async authenticate(authorization: string[] | undefined): Promise<ApiClient> {
    if (authorization !== undefined && authorization.length > 1) {
      throw new DomainError(ErrorCode.Unauthenticated, 'Send exactly one Authorization header.');
    }
    const match = /^bearer (\S+)$/i.exec(authorization?.[0].trim() ?? '');
    const client = match && isApiKeyShaped(match[1]) ? await this.clients.findByKeyHash(hashApiKey(match[1])) : undefined;
    if (!client) throw unauthenticated();
    return client;
  }
}
