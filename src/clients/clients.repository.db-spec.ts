import { eventually } from '../../test/support/eventually';
import { useTestDatabase } from '../../test/support/test-database';
import { hashApiKey } from './api-key';
import { ApiKeysService } from './api-keys.service';
import { ClientsRepository } from './clients.repository';
import { ClientsService, newApiKey } from './clients.service';

describe('ClientsRepository on Postgres: clients and their keys', () => {
  const db = useTestDatabase();
  let clients: ClientsRepository;

  beforeEach(() => {
    clients = new ClientsRepository(db.dataSource);
  });

  async function client(name = 'shop'): Promise<{ id: string; apiKey: string }> {
    const created = await new ClientsService(clients).create(name);
    return { id: created.id, apiKey: created.api_key };
  }

  const keyRow = async (keyId: string) =>
    (
      (await db.dataSource.query(`SELECT key_hash, prefix, expires_at - now() <= interval '0' AS ended FROM api_keys WHERE id = $1`, [
        keyId,
      ])) as { key_hash: string; prefix: string | null; ended: boolean | null }[]
    )[0];

  it('creates a client with its first key, stored as its hash and prefix, found by its hash with no end', async () => {
    const { id, apiKey } = await client();

    const found = await clients.findActiveKey(hashApiKey(apiKey));

    expect(found).toEqual({ client: { id, name: 'shop' }, keyId: expect.stringMatching(/^key_/), expiresInMs: null });
    expect(await keyRow(found!.keyId)).toEqual({ key_hash: hashApiKey(apiKey), prefix: apiKey.slice(0, 9), ended: null });
    expect(await clients.findActiveKey(hashApiKey(`${apiKey.slice(0, -1)}x`))).toBeUndefined();
  });

  it('adds keys that work beside the first, and none for a client that does not exist', async () => {
    const { id, apiKey } = await client();
    const second = newApiKey();

    const added = await clients.addKey(id, second.stored);

    expect(added).toMatchObject({ id: second.stored.id, clientId: id, prefix: second.stored.prefix, revokedAt: null, expiresAt: null });
    expect(added).not.toHaveProperty('keyHash');
    expect((await clients.findActiveKey(second.stored.hash))?.client.id).toBe(id);
    expect((await clients.findActiveKey(hashApiKey(apiKey)))?.client.id).toBe(id);
    expect(await clients.addKey('00000000-0000-4000-8000-000000000000', newApiKey().stored)).toBeUndefined();
  });

  it('rolls a key: the new one works, the old one until its end as Postgres counts it, then not at all', async () => {
    const { id, apiKey } = await client();
    const old = (await clients.findActiveKey(hashApiKey(apiKey)))!;
    const next = newApiKey();

    const outcome = await clients.rollKey(old.keyId, next.stored, 0.0005);

    expect(outcome).toMatchObject({ kind: 'rolled', added: { id: next.stored.id, clientId: id }, old: { id: old.keyId } });
    const during = (await clients.findActiveKey(hashApiKey(apiKey)))!;
    expect(during.expiresInMs).toBeGreaterThan(1_000);
    expect(during.expiresInMs).toBeLessThanOrEqual(1_800);
    await eventually(async () => ((await clients.findActiveKey(hashApiKey(apiKey))) === undefined ? true : undefined), {
      timeoutMs: 5_000,
      what: 'the old key to end',
    });
    expect((await clients.findActiveKey(next.stored.hash))?.client.id).toBe(id);
  });

  it('ends the old key at once when rolled with no overlap', async () => {
    const { apiKey } = await client();
    const old = (await clients.findActiveKey(hashApiKey(apiKey)))!;

    await clients.rollKey(old.keyId, newApiKey().stored, 0);

    expect(await clients.findActiveKey(hashApiKey(apiKey))).toBeUndefined();
  });

  it('refuses to roll a key twice, a revoked key or a missing one, and adds no key then', async () => {
    const { apiKey } = await client();
    const { keyId } = (await clients.findActiveKey(hashApiKey(apiKey)))!;
    await clients.rollKey(keyId, newApiKey().stored, 1);
    const countKeys = async () => ((await db.dataSource.query(`SELECT count(*)::int AS n FROM api_keys`)) as { n: number }[])[0].n;

    expect(await clients.rollKey(keyId, newApiKey().stored, 1)).toMatchObject({ kind: 'refused', old: { id: keyId } });
    await clients.revokeKey(keyId);
    expect(await clients.rollKey(keyId, newApiKey().stored, 1)).toMatchObject({ kind: 'refused', old: { id: keyId } });
    expect(await clients.rollKey('key_01JDQ2ZC4R5S8V9W0X1Y2Z3A4B', newApiKey().stored, 1)).toEqual({ kind: 'missing' });
    expect(await countKeys()).toBe(2);
  });

  it('lets only one of four concurrent rolls of a key add a key', async () => {
    const { apiKey } = await client();
    const { keyId } = (await clients.findActiveKey(hashApiKey(apiKey)))!;

    const outcomes = await Promise.all(Array.from({ length: 4 }, () => clients.rollKey(keyId, newApiKey().stored, 1)));

    expect(outcomes.map((outcome) => outcome.kind).sort()).toEqual(['refused', 'refused', 'refused', 'rolled']);
  });

  it('revokes a key at once, keeps its first revocation time when revoked again, and leaves the others working', async () => {
    const { id, apiKey } = await client();
    const { keyId } = (await clients.findActiveKey(hashApiKey(apiKey)))!;
    const other = newApiKey();
    await clients.addKey(id, other.stored);

    const first = await clients.revokeKey(keyId);
    const again = await clients.revokeKey(keyId);

    expect(first).toMatchObject({ kind: 'revoked', key: { id: keyId, revokedAt: expect.any(Date) } });
    expect(again).toEqual({ kind: 'already_revoked', key: (first as { key: unknown }).key });
    expect(await clients.findActiveKey(hashApiKey(apiKey))).toBeUndefined();
    expect((await clients.findActiveKey(other.stored.hash))?.client.id).toBe(id);
    expect(await clients.revokeKey('key_01JDQ2ZC4R5S8V9W0X1Y2Z3A4B')).toEqual({ kind: 'missing' });
  });

  it('keeps the latest use of each key, whichever process writes last', async () => {
    const { id, apiKey } = await client();
    const { keyId } = (await clients.findActiveKey(hashApiKey(apiKey)))!;
    const other = newApiKey();
    await clients.addKey(id, other.stored);
    const later = new Date('2026-06-01T00:00:02Z');

    await clients.recordUsage(new Map([[keyId, later], [other.stored.id, new Date('2026-06-01T00:00:01Z')]]));
    await clients.recordUsage(new Map([[keyId, new Date('2026-06-01T00:00:00Z')]]));

    const [listed] = await clients.listWithKeys();
    expect(listed.keys.map((key) => [key.id, key.lastUsedAt])).toEqual([
      [keyId, later],
      [other.stored.id, new Date('2026-06-01T00:00:01Z')],
    ]);
  });

  it('lists every client, oldest first, with its keys and never a hash; a client without keys too', async () => {
    const first = await client('first');
    const second = await client('second');
    const { keyId } = (await clients.findActiveKey(hashApiKey(second.apiKey)))!;
    await clients.revokeKey(keyId);
    await db.dataSource.query(`DELETE FROM api_keys WHERE client_id = $1`, [first.id]);

    const listed = await new ApiKeysService(clients).list();

    expect(listed.map((entry) => [entry.name, entry.keys.map((key) => key.status)])).toEqual([
      ['first', []],
      ['second', ['revoked']],
    ]);
    const text = JSON.stringify(listed);
    expect(text).not.toContain(hashApiKey(second.apiKey));
    expect(text).not.toContain(second.apiKey);
  });
});

