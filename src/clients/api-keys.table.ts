import { type RecordOf, col, defineTable } from '../database/table';

/**
 * The keys of each client: several may work at once (a roll's overlap), and
 * each is stopped on its own. Only the key's SHA-256 is stored.
 */
export const apiKeysTable = defineTable('api_keys', {
  /** `key_…`: the key's public name. */
  id: col.text('id'),
  clientId: col.uuid('client_id'),
  keyHash: col.char('key_hash'),
  /** `sk_` and the key's first six characters, for display; null for keys made before keys had one. */
  prefix: col.text('prefix').orNull(),
  createdAt: col.timestamptz('created_at'),
  /** The latest use the API processes have written down (see ApiKeyUsage: coalesced, not per request). */
  lastUsedAt: col.timestamptz('last_used_at').orNull(),
  /** Set by a roll: the key works until then. */
  expiresAt: col.timestamptz('expires_at').orNull(),
  revokedAt: col.timestamptz('revoked_at').orNull(),
});

/** A row of the api_keys table. */
export type ApiKeyRecord = RecordOf<typeof apiKeysTable>;
