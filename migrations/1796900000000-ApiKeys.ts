import type { MigrationInterface, QueryRunner } from 'typeorm';
import { ulid } from 'ulid';

/**
 * Several API keys per client, each with its own life: api_keys holds the
 * SHA-256 of each key (as api_clients.api_key_hash did), a short prefix to
 * show, when it was made and last used, when a roll ends it (expires_at) and
 * when it was revoked. Like api_clients, it is read by key before any client
 * is known: a directory table, not one sharded by client.
 *
 * Each client's key moves over unchanged, so every key in use keeps working
 * through the deploy: same hash, no expiry, created when its client was. Its
 * prefix is null: only the hash was ever stored. Its id is a ULID of the
 * client's creation time, made here rather than in SQL, which has no ULID.
 *
 * down puts one key per client back: the newest that still works, with no
 * expiry. The others cannot be represented and are lost; a client with no
 * working key gets the hash of a random value, a key nobody holds, so a
 * revoked key never comes back.
 */
export class ApiKeys1796900000000 implements MigrationInterface {
  name = 'ApiKeys1796900000000';

  async up(db: QueryRunner): Promise<void> {
    await db.query(`
      CREATE TABLE api_keys (
        id           text PRIMARY KEY CONSTRAINT api_keys_id_check CHECK (id ~ '^key_[0-9A-HJKMNP-TV-Z]{26}$'),
        client_id    uuid NOT NULL REFERENCES api_clients (id),
        key_hash     char(64) NOT NULL CONSTRAINT api_keys_key_hash_key UNIQUE,
        prefix       text CONSTRAINT api_keys_prefix_check CHECK (prefix ~ '^sk_[A-Za-z0-9_-]{6}$'),
        created_at   timestamptz NOT NULL DEFAULT now(),
        last_used_at timestamptz,
        expires_at   timestamptz,
        revoked_at   timestamptz
      )`);
    await db.query(`CREATE INDEX api_keys_client_idx ON api_keys (client_id, created_at)`);

    const clients = (await db.query(`SELECT id, created_at FROM api_clients`)) as { id: string; created_at: Date }[];
    await db.query(
      `INSERT INTO api_keys (id, client_id, key_hash, created_at)
       SELECT moved.key_id, c.id, c.api_key_hash, c.created_at
         FROM unnest($1::text[], $2::uuid[]) AS moved (key_id, client_id)
         JOIN api_clients c ON c.id = moved.client_id`,
      [clients.map((client) => `key_${ulid(client.created_at.getTime())}`), clients.map((client) => client.id)],
    );
    await db.query(`ALTER TABLE api_clients DROP COLUMN api_key_hash`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(`ALTER TABLE api_clients ADD COLUMN api_key_hash char(64)`);
    await db.query(`
      UPDATE api_clients c SET api_key_hash = working.key_hash
        FROM (SELECT DISTINCT ON (client_id) client_id, key_hash FROM api_keys
               WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())
               ORDER BY client_id, created_at DESC, id DESC) AS working
       WHERE working.client_id = c.id`);
    await db.query(`
      UPDATE api_clients SET api_key_hash = encode(sha256(convert_to(gen_random_uuid()::text, 'UTF8')), 'hex')
       WHERE api_key_hash IS NULL`);
    await db.query(`
      ALTER TABLE api_clients
        ALTER COLUMN api_key_hash SET NOT NULL,
        ADD CONSTRAINT api_clients_api_key_hash_key UNIQUE (api_key_hash)`);
    await db.query(`DROP TABLE api_keys`);
  }
}
