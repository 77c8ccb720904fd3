import { LRUCache } from 'lru-cache';
import { DomainError, ErrorCode } from '../common/domain-error';
import type { EntityManager } from 'typeorm';
import { generateApiKey, hashApiKey, isApiKeyShaped } from './api-key';
import { unauthenticated } from './clients.errors';
import { ClientsRepository } from './clients.repository';
import type { ApiClient } from './clients.table';

/** How long, and for how many keys, a process reuses a key's lookup. */
export interface AuthCacheOptions {
  ttlMs: number;
  maxKeys: number;
}

/**
 * API clients: creation and authentication. Built by ClientsModule from the
 * configuration (scripts make their own, with no cache: they never authenticate).
 */
export class ClientsService {
  /**
   * Known keys only, by hash. An unknown key is looked up every time: caching
   * refusals would let a spray of random keys evict the real ones, and the
   * failed-authentication limit already bounds what refusals cost.
   */
  private readonly known?: LRUCache<string, ApiClient>;

  constructor(
    private readonly clients: ClientsRepository,
    cache: AuthCacheOptions = { ttlMs: 0, maxKeys: 1 },
  ) {
    if (cache.ttlMs > 0) this.known = new LRUCache({ max: cache.maxKeys, ttl: cache.ttlMs });
  }

  /** Creates a client, in `db` when given one. The key returned is the only copy the client will ever be shown. */
  async create(name: string, db?: EntityManager): Promise<ApiClient & { api_key: string }> {
    if (name.length < 1 || name.length > 100) {
      throw new DomainError(ErrorCode.ParameterInvalid, 'name must be 1 to 100 characters', { param: 'name' });
    }
    const apiKey = generateApiKey();
    const client = await this.clients.create(name, hashApiKey(apiKey), db);
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
    const keyHash = keyHashOf(authorization);
    const cached = this.known?.get(keyHash);
    if (cached) return cached;
    const client = await this.clients.findByKeyHash(keyHash);
    if (!client) throw unauthenticated();
    this.known?.set(keyHash, client);
    return client;
  }

  /** The client `authenticate` would answer without a lookup: the key's, if this process knows it now. */
  knownClient(authorization: string[] | undefined): ApiClient | undefined {
    if (!this.known) return undefined;
    try {
      return this.known.get(keyHashOf(authorization));
    } catch {
      return undefined;
    }
  }
}

/** The hash of the one bearer key in `authorization`; unauthenticated when there is not exactly one of our shape. */
function keyHashOf(authorization: string[] | undefined): string {
  if (authorization !== undefined && authorization.length > 1) {
    throw new DomainError(ErrorCode.Unauthenticated, 'Send exactly one Authorization header.');
  }
  const match = /^bearer (\S+)$/i.exec(authorization?.[0].trim() ?? '');
  if (!match || !isApiKeyShaped(match[1])) throw unauthenticated();
  return hashApiKey(match[1]);
}
