import { ErrorCode } from '../common/domain-error';
import { strictMock } from '../common/strict-mock.fixture';
import { API_KEY_ID_PATTERN, hashApiKey } from './api-key';
import { ApiKeysService } from './api-keys.service';
import type { ApiKey, ClientsRepository, NewApiKey } from './clients.repository';

const CLIENT = '0b9f5c43-6a39-4c55-9d52-0d8e1b8a4f11';
const KEY = 'key_01JDQ2ZC4R5S8V9W0X1Y2Z3A4B';

function key(overrides: Partial<ApiKey> = {}): ApiKey {
  return {
    id: KEY,
    clientId: CLIENT,
    prefix: 'sk_abcdef',
    createdAt: new Date('2026-01-01T00:00:00Z'),
    lastUsedAt: null,
    expiresAt: null,
    revokedAt: null,
    ...overrides,
  };
}

describe('ApiKeysService', () => {
  function sut() {
    const clients = strictMock<ClientsRepository>('ClientsRepository');
    return { keys: new ApiKeysService(clients), clients };
  }

  it('adds a key shown once, storing its hash and prefix only', async () => {
    const { keys, clients } = sut();
    clients.addKey = jest.fn(async (clientId: string, stored: NewApiKey) => key({ id: stored.id, clientId, prefix: stored.prefix }));

    const added = await keys.add(CLIENT);

    const stored = clients.addKey.mock.calls[0][1];
    expect(added).toEqual({ id: stored.id, client: CLIENT, api_key: expect.stringMatching(/^sk_/), prefix: stored.prefix });
    expect(stored).toEqual({ id: expect.stringMatching(API_KEY_ID_PATTERN), hash: hashApiKey(added.api_key), prefix: added.api_key.slice(0, 9) });
  });

  it.each(['not-a-uuid', CLIENT])('refuses to add a key to an unknown client (%s)', async (clientId) => {
    const { keys, clients } = sut();
    clients.addKey = jest.fn().mockResolvedValue(undefined);

    await expect(keys.add(clientId)).rejects.toMatchObject({ code: ErrorCode.NotFound, details: { param: 'client' } });
  });

  it.each(['', '-1', '1e3', 'abc', '168.5', '0x10', ' 1', 'Infinity', 'NaN'])(
    'refuses %p hours of overlap before touching anything',
    async (hours) => {
      const { keys } = sut();

      await expect(keys.roll(KEY, hours)).rejects.toMatchObject({
        code: ErrorCode.ParameterInvalid,
        details: { param: 'expires-in-hours' },
      });
    },
  );

  it.each([
    ['0', 0],
    ['0.001', 0.001],
    ['24', 24],
    ['168', 168],
  ])('rolls with %s hours of overlap', async (hours, overlap) => {
    const { keys, clients } = sut();
    const end = new Date('2026-01-02T00:00:00Z');
    clients.rollKey = jest.fn(async (_old: string, stored: NewApiKey, _hours: number) => ({
      kind: 'rolled' as const,
      added: key({ id: stored.id, prefix: stored.prefix }),
      old: key({ expiresAt: end }),
    }));

    const rolled = await keys.roll(KEY, hours);

    expect(clients.rollKey).toHaveBeenCalledWith(KEY, expect.anything(), overlap);
    expect(rolled).toMatchObject({ client: CLIENT, api_key: expect.stringMatching(/^sk_/), rolled: { id: KEY, expires_at: end.toISOString() } });
  });

  it.each([
    ['revoked', key({ revokedAt: new Date('2026-01-01T01:00:00Z') }), /revoked at 2026-01-01T01:00:00.000Z/],
    ['expired', key({ expiresAt: new Date('2026-01-01T01:00:00Z') }), /expired at/],
    ['already rolled', key({ expiresAt: new Date(Date.now() + 3_600_000) }), /rolled already.*revoke it/],
  ])('refuses to roll a key that is %s', async (_state, old, message) => {
    const { keys, clients } = sut();
    clients.rollKey = jest.fn().mockResolvedValue({ kind: 'refused', old });

    await expect(keys.roll(KEY, '1')).rejects.toMatchObject({ code: ErrorCode.ParameterInvalid, details: { param: 'roll' }, message });
  });

  it.each([['key_nope'], [KEY]])('refuses to roll or revoke an unknown key (%s)', async (keyId) => {
    const { keys, clients } = sut();
    clients.rollKey = jest.fn().mockResolvedValue({ kind: 'missing' });
    clients.revokeKey = jest.fn().mockResolvedValue({ kind: 'missing' });

    await expect(keys.roll(keyId, '1')).rejects.toMatchObject({ code: ErrorCode.NotFound, details: { param: 'roll' } });
    await expect(keys.revoke(keyId)).rejects.toMatchObject({ code: ErrorCode.NotFound, details: { param: 'revoke' } });
  });

  it('revokes a key, and answers a second revocation with the first one’s time, as no error', async () => {
    const { keys, clients } = sut();
    const revokedAt = new Date('2026-01-01T02:00:00Z');
    clients.revokeKey = jest
      .fn()
      .mockResolvedValueOnce({ kind: 'revoked', key: key({ revokedAt }) })
      .mockResolvedValueOnce({ kind: 'already_revoked', key: key({ revokedAt }) });

    const first = await keys.revoke(KEY);
    const second = await keys.revoke(KEY);

    expect(first).toMatchObject({ id: KEY, status: 'revoked', revoked_at: revokedAt.toISOString(), already_revoked: false });
    expect(second).toMatchObject({ id: KEY, status: 'revoked', revoked_at: revokedAt.toISOString(), already_revoked: true });
  });

  it('lists clients and their keys with each key’s state, and nothing secret', async () => {
    const { keys, clients } = sut();
    const now = Date.now();
    clients.listWithKeys = jest.fn().mockResolvedValue([
      {
        id: CLIENT,
        name: 'shop',
        createdAt: new Date('2026-01-01T00:00:00Z'),
        keys: [
          key({ id: 'key_1', prefix: null }),
          key({ id: 'key_2', expiresAt: new Date(now + 60_000) }),
          key({ id: 'key_3', expiresAt: new Date(now - 60_000) }),
          key({ id: 'key_4', revokedAt: new Date(now - 60_000) }),
        ],
      },
    ]);

    const [listed] = await keys.list();

    expect(listed.keys.map((listedKey) => [listedKey.id, listedKey.status])).toEqual([
      ['key_1', 'active'],
      ['key_2', 'expiring'],
      ['key_3', 'expired'],
      ['key_4', 'revoked'],
    ]);
    expect(Object.keys(listed.keys[0]).sort()).toEqual(['created_at', 'expires_at', 'id', 'last_used_at', 'prefix', 'revoked_at', 'status']);
  });
});
