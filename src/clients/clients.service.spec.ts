import type { EntityManager } from 'typeorm';
import { DomainError, ErrorCode } from '../common/domain-error';
import { strictMock } from '../common/strict-mock.fixture';
import { API_KEY_ID_PATTERN, generateApiKey, hashApiKey } from './api-key';
import type { ApiKeyUsage } from './api-key-usage';
import type { ActiveKey, ClientsRepository, NewApiKey } from './clients.repository';
import { ClientsService } from './clients.service';

describe('ClientsService.authenticate', () => {
  const client = { id: 'c1', name: 'shop' };

  function sut() {
    const clients = strictMock<ClientsRepository>('ClientsRepository');
    const usage = strictMock<ApiKeyUsage>('ApiKeyUsage');
    return { service: new ClientsService(clients, undefined, usage), clients, usage };
  }

  it('finds the client of one bearer key, and notes the key’s use', async () => {
    const { service, clients, usage } = sut();
    clients.findActiveKey = jest.fn().mockResolvedValue({ client, keyId: 'key_1', expiresInMs: null });
    usage.record = jest.fn();

    const key = generateApiKey();

    await expect(service.authenticate([`Bearer ${key}`])).resolves.toEqual(client);
    expect(clients.findActiveKey).toHaveBeenCalledWith(hashApiKey(key));
    expect(usage.record).toHaveBeenCalledWith('key_1');
  });

  it('refuses a key the lookup does not find working (unknown, revoked or expired), and notes no use', async () => {
    const { service, clients } = sut();
    clients.findActiveKey = jest.fn().mockResolvedValue(undefined);

    await expect(service.authenticate([`Bearer ${generateApiKey()}`])).rejects.toMatchObject({ code: ErrorCode.Unauthenticated });
  });

  it('refuses a key not of the shape we issue without a lookup', async () => {
    await expect(sut().service.authenticate(['Bearer sk_one'])).rejects.toMatchObject({ code: ErrorCode.Unauthenticated });
  });

  it('refuses two Authorization headers without looking either up', async () => {
    const { service } = sut();

    const refusal = service.authenticate([`Bearer ${generateApiKey()}`, `Bearer ${generateApiKey()}`]);

    await expect(refusal).rejects.toThrow(DomainError);
    await expect(refusal).rejects.toMatchObject({
      code: ErrorCode.Unauthenticated,
      message: 'Send exactly one Authorization header.',
    });
  });

  it('refuses a missing header without a lookup', async () => {
    await expect(sut().service.authenticate(undefined)).rejects.toMatchObject({ code: ErrorCode.Unauthenticated });
  });
});

describe('ClientsService.create', () => {
  function sut() {
    const clients = strictMock<ClientsRepository>('ClientsRepository');
    clients.create = jest.fn(async (name: string, _key: NewApiKey, _db?: EntityManager) => ({ id: 'c1', name }));
    return { service: new ClientsService(clients), clients };
  }

  it('creates a client with a first key shown once, and only its id, hash and prefix stored', async () => {
    const { service, clients } = sut();

    const created = await service.create('shop');

    expect(created).toEqual({ id: 'c1', name: 'shop', api_key: expect.stringMatching(/^sk_/) });
    const stored = clients.create.mock.calls[0][1];
    expect(stored).toEqual({ id: expect.stringMatching(API_KEY_ID_PATTERN), hash: hashApiKey(created.api_key), prefix: created.api_key.slice(0, 9) });
    expect(clients.create).toHaveBeenCalledWith('shop', stored, undefined);
  });
});

describe('ClientsService.authenticate with a cache', () => {
  const client = { id: 'c1', name: 'shop' };

  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  function sut(ttlMs: number, found: (hash: string) => ActiveKey | undefined, lookupMs = 0) {
    const clients = strictMock<ClientsRepository>('ClientsRepository');
    clients.findActiveKey = jest.fn(async (hash: string) => {
      jest.advanceTimersByTime(lookupMs);
      return found(hash);
    });
    const usage = strictMock<ApiKeyUsage>('ApiKeyUsage');
    usage.record = jest.fn();
    return { service: new ClientsService(clients, { ttlMs, maxKeys: 10 }, usage), clients, usage };
  }

  it('reuses a known key’s lookup for the cache’s lifetime, and looks an unknown key up every time', async () => {
    const known = generateApiKey();
    const unknown = generateApiKey();
    const { service, clients, usage } = sut(1_000, (hash) =>
      hash === hashApiKey(known) ? { client, keyId: 'key_1', expiresInMs: null } : undefined,
    );

    await service.authenticate([`Bearer ${known}`]);
    await expect(service.authenticate([`Bearer ${known}`])).resolves.toEqual(client);
    expect(service.knownClient([`Bearer ${known}`])).toEqual(client);
    await expect(service.authenticate([`Bearer ${unknown}`])).rejects.toMatchObject({ code: ErrorCode.Unauthenticated });
    await expect(service.authenticate([`Bearer ${unknown}`])).rejects.toMatchObject({ code: ErrorCode.Unauthenticated });

    expect(clients.findActiveKey.mock.calls).toEqual([[hashApiKey(known)], [hashApiKey(unknown)], [hashApiKey(unknown)]]);
    // Every use is noted, the cached ones and the early path's included.
    expect(usage.record.mock.calls).toEqual([['key_1'], ['key_1'], ['key_1']]);
  });

  it('counts the cache’s lifetime from before the lookup was sent, so a slow lookup cannot stretch it', async () => {
    const key = generateApiKey();
    const { service, clients } = sut(1_000, () => ({ client, keyId: 'key_1', expiresInMs: null }), 400);

    await service.authenticate([`Bearer ${key}`]);
    jest.advanceTimersByTime(599);
    expect(service.knownClient([`Bearer ${key}`])).toEqual(client);
    jest.advanceTimersByTime(2);

    expect(service.knownClient([`Bearer ${key}`])).toBeUndefined();
    await service.authenticate([`Bearer ${key}`]);
    expect(clients.findActiveKey).toHaveBeenCalledTimes(2);
  });

  it('stops a rolled key at its end even on a cache hit, counted from before its lookup', async () => {
    const key = generateApiKey();
    // The lookup says 300 ms are left, and took 100 ms to answer: 200 ms remain once it is in.
    const found = jest.fn((): ActiveKey | undefined => ({ client, keyId: 'key_1', expiresInMs: 300 }));
    const { service } = sut(1_000, () => found(), 100);

    await service.authenticate([`Bearer ${key}`]);
    jest.advanceTimersByTime(199);
    await expect(service.authenticate([`Bearer ${key}`])).resolves.toEqual(client);
    jest.advanceTimersByTime(1);
    found.mockReturnValue(undefined);

    expect(service.knownClient([`Bearer ${key}`])).toBeUndefined();
    await expect(service.authenticate([`Bearer ${key}`])).rejects.toMatchObject({ code: ErrorCode.Unauthenticated });
  });
});
