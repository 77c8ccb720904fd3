import { Injectable } from '@nestjs/common';
import { DataSource, type EntityManager } from 'typeorm';
import { queryRow, queryRows } from '../database/sql';
import { type ApiKeyRecord, apiKeysTable } from './api-keys.table';
import { defineTable } from '../database/table';
import type { ApiClient } from './clients.table';

/** A key about to be stored: its id, its hash and its prefix; the key itself never reaches the database. */
export interface NewApiKey {
  id: string;
  hash: string;
  prefix: string;
}

/** A key that works now, and whose client it is. */
export interface ActiveKey {
  client: ApiClient;
  keyId: string;
  /** What is left of it as Postgres counts (ms), when a roll set its end; null when it has none. */
  expiresInMs: number | null;
}

/** What a roll did: nothing when the old key is missing or already stopped (or rolled), else the new key and the old one's end. */
export type RollOutcome =
  | { kind: 'missing' }
  | { kind: 'refused'; old: ApiKey }
  | { kind: 'rolled'; added: ApiKey; old: ApiKey };

export type RevokeOutcome = { kind: 'missing' } | { kind: 'revoked' | 'already_revoked'; key: ApiKey };

/** One client and its keys, oldest first. */
export interface ClientWithKeys extends ApiClient {
  createdAt: Date;
  keys: ApiKey[];
}

/** A key as the repository hands it out: everything but its hash, which only authentication reads. */
export type ApiKey = Omit<ApiKeyRecord, 'keyHash'>;

const { keyHash: _hash, ...SHOWN_COLUMNS } = apiKeysTable.columns;
const KEY_COLUMNS = defineTable(apiKeysTable.name, SHOWN_COLUMNS).selectList;
/** The same columns of `k`, each named `key.<property>`, beside a client's in one row. */
const KEY_COLUMNS_AS_KEY = Object.entries(SHOWN_COLUMNS)
  .map(([property, column]) => `k.${column.name} AS "key.${property}"`)
  .join(', ');

@Injectable()
export class ClientsRepository {
  constructor(private readonly dataSource: DataSource) {}

  /** The client and its first key, in `db` when given one (client:create's transaction, which adds its first webhook endpoint). */
  async create(name: string, key: NewApiKey, db: EntityManager = this.dataSource.manager): Promise<ApiClient> {
    const row = await queryRow<ApiClient>(
      db,
      `WITH client AS (
         INSERT INTO api_clients (name) VALUES ($1) RETURNING id, name
       ), key AS (
         INSERT INTO api_keys (id, client_id, key_hash, prefix) SELECT $2, id, $3, $4 FROM client
       )
       SELECT id, name FROM client`,
      [name, key.id, key.hash, key.prefix],
    );
    return row!;
  }

  /**
   * The client of a key that works now: not revoked, and not past the end a
   * roll gave it, by Postgres's clock, which also says how long it has left.
   */
  async findActiveKey(keyHash: string): Promise<ActiveKey | undefined> {
    const row = await queryRow<ApiClient & { keyId: string; expiresInMs: number | null }>(
      this.dataSource.manager,
      `SELECT c.id, c.name, k.id AS "keyId", (extract(epoch FROM k.expires_at - now()) * 1000)::float8 AS "expiresInMs"
         FROM api_keys k JOIN api_clients c ON c.id = k.client_id
        WHERE k.key_hash = $1 AND k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > now())`,
      [keyHash],
    );
    return row && { client: { id: row.id, name: row.name }, keyId: row.keyId, expiresInMs: row.expiresInMs };
  }

  /** Another key for the client; undefined when there is no such client. */
  async addKey(clientId: string, key: NewApiKey): Promise<ApiKey | undefined> {
    return queryRow<ApiKey>(
      this.dataSource.manager,
      `INSERT INTO api_keys (id, client_id, key_hash, prefix)
       SELECT $1, id, $2, $3 FROM api_clients WHERE id = $4
       RETURNING ${KEY_COLUMNS}`,
      [key.id, key.hash, key.prefix, clientId],
    );
  }

  /**
   * A new key for the old key's client, and the old one's end `hours` from
   * now (0: now), in one transaction under the old key's row lock: two rolls
   * of one key cannot both add one. Only a key that works and has no end yet
   * rolls; a revoked, expired or already rolled key is refused.
   */
  async rollKey(oldKeyId: string, key: NewApiKey, hours: number): Promise<RollOutcome> {
    return this.dataSource.transaction(async (db) => {
      const old = await queryRow<ApiKey>(db, `SELECT ${KEY_COLUMNS} FROM api_keys WHERE id = $1 FOR UPDATE`, [oldKeyId]);
      if (!old) return { kind: 'missing' };
      if (old.revokedAt !== null || old.expiresAt !== null) return { kind: 'refused', old };
      const added = await queryRow<ApiKey>(
        db,
        `INSERT INTO api_keys (id, client_id, key_hash, prefix) VALUES ($1, $2, $3, $4) RETURNING ${KEY_COLUMNS}`,
        [key.id, old.clientId, key.hash, key.prefix],
      );
      const ended = await queryRow<ApiKey>(
        db,
        `UPDATE api_keys SET expires_at = now() + make_interval(secs => $2::float8 * 3600)
          WHERE id = $1 RETURNING ${KEY_COLUMNS}`,
        [oldKeyId, hours],
      );
      return { kind: 'rolled', added: added!, old: ended! };
    });
  }

  /** Stops the key now. A key revoked before keeps its first revocation time. */
  async revokeKey(keyId: string): Promise<RevokeOutcome> {
    const revoked = await queryRow<ApiKey>(
      this.dataSource.manager,
      `UPDATE api_keys SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL RETURNING ${KEY_COLUMNS}`,
      [keyId],
    );
    if (revoked) return { kind: 'revoked', key: revoked };
    const before = await queryRow<ApiKey>(this.dataSource.manager, `SELECT ${KEY_COLUMNS} FROM api_keys WHERE id = $1`, [keyId]);
    return before ? { kind: 'already_revoked', key: before } : { kind: 'missing' };
  }

  /** Every client and its keys, the oldest client first, each client's keys oldest first. */
  async listWithKeys(): Promise<ClientWithKeys[]> {
    const rows = await queryRows<{ id: string; name: string; createdAt: Date } & { [K in keyof ApiKey as `key.${K}`]: ApiKey[K] | null }>(
      this.dataSource.manager,
      `SELECT c.id, c.name, c.created_at AS "createdAt", ${KEY_COLUMNS_AS_KEY}
         FROM api_clients c LEFT JOIN api_keys k ON k.client_id = c.id
        ORDER BY c.created_at, c.id, k.created_at, k.id`,
    );
    const clients = new Map<string, ClientWithKeys>();
    for (const row of rows) {
      const entry = clients.get(row.id) ?? { id: row.id, name: row.name, createdAt: row.createdAt, keys: [] };
      clients.set(row.id, entry);
      if (row['key.id'] !== null) {
        entry.keys.push(Object.fromEntries(Object.keys(SHOWN_COLUMNS).map((property) => [property, row[`key.${property as keyof ApiKey}`]])) as ApiKey);
      }
    }
    return [...clients.values()];
  }

  /**
   * Writes down the latest use of each key, in one statement for every key
   * a process saw since its last flush. Rows are taken in id order, so two
   * processes flushing the same keys wait for each other, never deadlock;
   * a later use already written (by another process) is kept.
   */
  async recordUsage(uses: ReadonlyMap<string, Date>): Promise<void> {
    const ids = [...uses.keys()].sort();
    await queryRows(
      this.dataSource.manager,
      `UPDATE api_keys k SET last_used_at = used.at
         FROM unnest($1::text[], $2::timestamptz[]) AS used (id, at)
        WHERE k.id = used.id AND (k.last_used_at IS NULL OR k.last_used_at < used.at)`,
      [ids, ids.map((id) => uses.get(id))],
    );
  }

  /** Every client's id, in order: what work done client by client (the key prune) goes through. */
  async ids(): Promise<string[]> {
    const rows = await queryRows<{ id: string }>(this.dataSource.manager, `SELECT id FROM api_clients ORDER BY id`);
    return rows.map((row) => row.id);
  }
}
