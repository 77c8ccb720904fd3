import type { DataSource } from 'typeorm';
import { ApiKeys1796900000000 } from '../../migrations/1796900000000-ApiKeys';
import { generateApiKey, hashApiKey } from '../../src/clients/api-key';
import { ClientsRepository } from '../../src/clients/clients.repository';
import { newApiKey } from '../../src/clients/clients.service';
import { useDatabaseBefore } from '../support/before-migration';

/**
 * ApiKeys on a database whose clients already hold keys: every key keeps
 * working through the migration, and down puts back one working key per
 * client (never a revoked one). In a database of its own, since it takes the
 * schema back to before ApiKeys.
 */
describe('the ApiKeys migration on existing clients', () => {
  const db = useDatabaseBefore(ApiKeys1796900000000, 'api_keys_migration');
  let dataSource: DataSource;

  beforeEach(() => {
    dataSource = db.dataSource;
  });

  /** A client as the schema before ApiKeys holds it: its one key's hash on its row. */
  async function clientBefore(clientName: string): Promise<{ id: string; apiKey: string }> {
    const apiKey = generateApiKey();
    const [client] = (await dataSource.query(`INSERT INTO api_clients (name, api_key_hash) VALUES ($1, $2) RETURNING id`, [
      clientName,
      hashApiKey(apiKey),
    ])) as { id: string }[];
    return { id: client.id, apiKey };
  }

  const hashesOnClients = async () =>
    Object.fromEntries(
      ((await dataSource.query(`SELECT name, api_key_hash FROM api_clients`)) as { name: string; api_key_hash: string }[]).map((row) => [
        row.name,
        row.api_key_hash,
      ]),
    );

  it('moves each client’s key over, working, with no prefix and no end', async () => {
    const a = await clientBefore('a');
    const b = await clientBefore('b');

    await dataSource.runMigrations({ transaction: 'all' });

    const clients = new ClientsRepository(dataSource);
    expect(await clients.findActiveKey(hashApiKey(a.apiKey))).toEqual({
      client: { id: a.id, name: 'a' },
      keyId: expect.stringMatching(/^key_[0-9A-HJKMNP-TV-Z]{26}$/),
      expiresInMs: null,
    });
    expect((await clients.findActiveKey(hashApiKey(b.apiKey)))?.client.id).toBe(b.id);
    const [listed] = await clients.listWithKeys();
    expect(listed.keys).toEqual([expect.objectContaining({ prefix: null, expiresAt: null, revokedAt: null, lastUsedAt: null })]);
  });

  it('puts back, on down, each client’s newest working key, and a key nobody holds for a client with none', async () => {
    const rolled = await clientBefore('rolled');
    const revoked = await clientBefore('revoked');
    await dataSource.runMigrations({ transaction: 'all' });
    const clients = new ClientsRepository(dataSource);
    const next = newApiKey();
    await clients.rollKey((await clients.findActiveKey(hashApiKey(rolled.apiKey)))!.keyId, next.stored, 1);
    await clients.revokeKey((await clients.findActiveKey(hashApiKey(revoked.apiKey)))!.keyId);

    await db.undoThrough();

    const hashes = await hashesOnClients();
    expect(hashes.rolled).toBe(next.stored.hash);
    expect(hashes.revoked).toMatch(/^[0-9a-f]{64}$/);
    expect(hashes.revoked).not.toBe(hashApiKey(revoked.apiKey));
  });
});
