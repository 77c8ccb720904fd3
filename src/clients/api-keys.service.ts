import { DomainError, ErrorCode } from '../common/domain-error';
import { API_KEY_ID_PATTERN } from './api-key';
import type { ApiKey, ClientsRepository } from './clients.repository';
import { newApiKey } from './clients.service';

/** The longest overlap a roll gives the old key: a week, as for a webhook secret's rotation. */
export const MAX_ROLL_OVERLAP_HOURS = 168;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A key's state at `now`: what client:list says of it. */
type KeyStatus = 'active' | 'expiring' | 'expired' | 'revoked';

/** What the commands show of a key: never the key, never its hash. */
export interface KeyView {
  id: string;
  client: string;
  prefix: string | null;
  status: KeyStatus;
  created_at: string;
  last_used_at: string | null;
  expires_at: string | null;
  revoked_at: string | null;
}

/** A key just made: the only time its secret is shown. */
export interface IssuedKey {
  id: string;
  client: string;
  api_key: string;
  prefix: string;
}

export interface ClientView {
  id: string;
  name: string;
  created_at: string;
  keys: Omit<KeyView, 'client'>[];
}

/**
 * The operator's key management (client:key, client:list): add a key, roll
 * one (a new key, the old one ending after an overlap), revoke one. The API
 * processes see a change within AUTH_CACHE_TTL_MS (see ClientsService).
 * Refusals are coded errors that name the argument at fault, and change nothing.
 */
export class ApiKeysService {
  constructor(private readonly clients: ClientsRepository) {}

  async add(clientId: string): Promise<IssuedKey> {
    const { apiKey, stored } = newApiKey();
    const added = UUID.test(clientId) ? await this.clients.addKey(clientId, stored) : undefined;
    if (!added) throw new DomainError(ErrorCode.NotFound, `No client ${clientId}.`, { param: 'client' });
    return { id: added.id, client: added.clientId, api_key: apiKey, prefix: stored.prefix };
  }

  /** A new key for the client of `keyId`; the old one works for `hours` more (a decimal number; 0: stops now). */
  async roll(keyId: string, hours: string): Promise<IssuedKey & { rolled: { id: string; expires_at: string } }> {
    const overlap = overlapHours(hours);
    const { apiKey, stored } = newApiKey();
    const outcome = API_KEY_ID_PATTERN.test(keyId) ? await this.clients.rollKey(keyId, stored, overlap) : { kind: 'missing' as const };
    switch (outcome.kind) {
      case 'missing':
        throw missingKey(keyId, 'roll');
      case 'refused':
        throw new DomainError(ErrorCode.ParameterInvalid, `${keyId} cannot be rolled: ${whyStopped(outcome.old)}.`, { param: 'roll' });
      case 'rolled':
        return {
          id: outcome.added.id,
          client: outcome.added.clientId,
          api_key: apiKey,
          prefix: stored.prefix,
          rolled: { id: outcome.old.id, expires_at: outcome.old.expiresAt!.toISOString() },
        };
    }
  }

  /** Stops the key now. Revoking a revoked key changes nothing and is no error: it says when it was revoked. */
  async revoke(keyId: string): Promise<KeyView & { already_revoked: boolean }> {
    const outcome = API_KEY_ID_PATTERN.test(keyId) ? await this.clients.revokeKey(keyId) : { kind: 'missing' as const };
    if (outcome.kind === 'missing') throw missingKey(keyId, 'revoke');
    return { ...keyView(outcome.key, new Date()), already_revoked: outcome.kind === 'already_revoked' };
  }

  async list(): Promise<ClientView[]> {
    const now = new Date();
    return (await this.clients.listWithKeys()).map((client) => ({
      id: client.id,
      name: client.name,
      created_at: client.createdAt.toISOString(),
      keys: client.keys.map((key) => {
        const { client: _client, ...view } = keyView(key, now);
        return view;
      }),
    }));
  }
}

/** `--expires-in-hours`: a decimal number of hours from 0 to MAX_ROLL_OVERLAP_HOURS, as written (no sign, no exponent). */
function overlapHours(text: string): number {
  const hours = Number(text);
  if (!/^\d*\.?\d+$/.test(text) || hours > MAX_ROLL_OVERLAP_HOURS) {
    throw new DomainError(ErrorCode.ParameterInvalid, `expires-in-hours must be a number of hours from 0 to ${MAX_ROLL_OVERLAP_HOURS}.`, {
      param: 'expires-in-hours',
    });
  }
  return hours;
}

function missingKey(keyId: string, param: string): DomainError {
  return new DomainError(ErrorCode.NotFound, `No API key ${keyId}.`, { param });
}

function whyStopped(key: ApiKey): string {
  if (key.revokedAt) return `it was revoked at ${key.revokedAt.toISOString()}`;
  const end = key.expiresAt!.toISOString();
  return key.expiresAt! <= new Date() ? `it expired at ${end}` : `it was rolled already and expires at ${end}; revoke it to stop it now`;
}

function keyView(key: ApiKey, now: Date): KeyView {
  const status: KeyStatus = key.revokedAt
    ? 'revoked'
    : key.expiresAt === null
      ? 'active'
      : key.expiresAt <= now
        ? 'expired'
        : 'expiring';
  return {
    id: key.id,
    client: key.clientId,
    prefix: key.prefix,
    status,
    created_at: key.createdAt.toISOString(),
    last_used_at: key.lastUsedAt?.toISOString() ?? null,
    expires_at: key.expiresAt?.toISOString() ?? null,
    revoked_at: key.revokedAt?.toISOString() ?? null,
  };
}
