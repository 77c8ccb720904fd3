import { LRUCache } from 'lru-cache';
import { DomainError, ErrorCode } from '../common/domain-error';
import type { EntityManager } from 'typeorm';
import type { ApiKeyUsage } from './api-key-usage';
import { apiKeyPrefix, generateApiKey, hashApiKey, isApiKeyShaped, newApiKeyId } from './api-key';
import { unauthenticated } from './clients.errors';
import type { ClientsRepository, NewApiKey } from './clients.repository';
import type { ApiClient } from './clients.table';

/** How long, and for how many keys, a process reuses a key's lookup. */
export interface AuthCacheOptions {
  ttlMs: number;
  maxKeys: number;
}

/** A key's lookup as this process keeps it. */
interface KnownKey {
  client: ApiClient;
  keyId: string;
  /** When a roll ends the key, on this process's monotonic clock (performance.now()). */
  endsAt?: number;
}

/** A new key: the secret to show once, and what is stored of it. */
export function newApiKey(): { apiKey: string; stored: NewApiKey } {
  const apiKey = generateApiKey();
  return { apiKey, stored: { id: newApiKeyId(), hash: hashApiKey(apiKey), prefix: apiKeyPrefix(apiKey) } };
}

/**
 * API clients: creation and authentication. Built by ClientsModule from the
 * configuration (scripts make their own, with no cache: they never authenticate).
 */
export class ClientsService {
  /**
   * Working keys only, by hash, each for at most ttlMs counted from before
   * its lookup was sent: a key revoked (or rolled) since is refused (or its
   * end known) on this process at most ttlMs after the commit. An unknown or
   * stopped key is looked up every time: caching refusals would let a spray
   * of random keys evict the real ones, and the failed-authentication limit
   * already bounds what refusals cost.
   */
  private readonly known?: LRUCache<string, KnownKey>;
  private readonly ttlMs: number;

  constructor(
    private readonly clients: ClientsRepository,
    cache: AuthCacheOptions = { ttlMs: 0, maxKeys: 1 },
    private readonly usage?: ApiKeyUsage,
  ) {
    this.ttlMs = cache.ttlMs;
    // The clock of `endsAt` too (its default, named so that one clock rules both).
    if (cache.ttlMs > 0) this.known = new LRUCache({ max: cache.maxKeys, ttl: cache.ttlMs, perf: performance });
  }

  /** Creates a client, in `db` when given one. The key returned is the only copy the client will ever be shown. */
  async create(name: string, db?: EntityManager): Promise<ApiClient & { api_key: string }> {
    if (name.length < 1 || name.length > 100) {
      throw new DomainError(ErrorCode.ParameterInvalid, 'name must be 1 to 100 characters', { param: 'name' });
    }
    const { apiKey, stored } = newApiKey();
    const client = await this.clients.create(name, stored, db);
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
    const known = this.knownKey(keyHash) ?? (await this.lookUp(keyHash));
    this.usage?.record(known.keyId);
    return known.client;
  }

  /** The client `authenticate` would answer without a lookup: the key's, if this process knows it now. */
  knownClient(authorization: string[] | undefined): ApiClient | undefined {
    if (!this.known) return undefined;
    let known: KnownKey | undefined;
    try {
      known = this.knownKey(keyHashOf(authorization));
    } catch {
      return undefined;
    }
    if (known) this.usage?.record(known.keyId);
    return known?.client;
  }

  /** The kept lookup of a key, unless a roll's end has come: checked at each use, so the key stops on time. */
  private knownKey(keyHash: string): KnownKey | undefined {
    const known = this.known?.get(keyHash);
    if (known?.endsAt !== undefined && performance.now() >= known.endsAt) {
      this.known!.delete(keyHash);
      return undefined;
    }
    return known;
  }

  private async lookUp(keyHash: string): Promise<KnownKey> {
    const askedAt = performance.now();
    const found = await this.clients.findActiveKey(keyHash);
    if (!found) throw unauthenticated();
    const known = {
      client: found.client,
      keyId: found.keyId,
      // Counted from before the statement was sent, the end never comes late.
      ...(found.expiresInMs !== null && { endsAt: askedAt + found.expiresInMs }),
    };
    const ttl = Math.floor(this.ttlMs - (performance.now() - askedAt));
    if (this.known && ttl > 0) this.known.set(keyHash, known, { ttl });
    return known;
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
