import type { EntityManager } from 'typeorm';
import { DomainError, ErrorCode } from '../common/domain-error';
import { strictMock } from '../common/strict-mock.fixture';
import { generateApiKey, hashApiKey } from './api-key';
import type { ClientsRepository } from './clients.repository';
import { ClientsService } from './clients.service';

describe('ClientsService.authenticate', () => {
  const client = { id: 'c1', name: 'shop' };

  function sut() {
    const clients = strictMock<ClientsRepository>('ClientsRepository');
    return { service: new ClientsService(clients), clients };
  }

  it('finds the client of one bearer key', async () => {
    const { service, clients } = sut();
    clients.findByKeyHash = jest.fn().mockResolvedValue(client);

    const key = generateApiKey();

    await expect(service.authenticate([`Bearer ${key}`])).resolves.toEqual(client);
    expect(clients.findByKeyHash).toHaveBeenCalledWith(hashApiKey(key));
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
    clients.create = jest.fn(async (name: string, _hash: string, _db?: EntityManager) => ({ id: 'c1', name }));
    return { service: new ClientsService(clients), clients };
  }

  it('creates a client with a key shown once and only its hash stored', async () => {
    const { service, clients } = sut();

    const created = await service.create('shop');

    expect(created).toEqual({ id: 'c1', name: 'shop', api_key: expect.stringMatching(/^sk_/) });
    expect(clients.create).toHaveBeenCalledWith('shop', hashApiKey(created.api_key), undefined);
  });
});

describe('ClientsService.authenticate with a cache', () => {
  const client = { id: 'c1', name: 'shop' };

  it('reuses a known key’s lookup for the cache’s lifetime, and looks an unknown key up every time', async () => {
    const clients = strictMock<ClientsRepository>('ClientsRepository');
    const known = generateApiKey();
    clients.findByKeyHash = jest.fn(async (hash: string) => (hash === hashApiKey(known) ? client : undefined));
    const service = new ClientsService(clients, { ttlMs: 60_000, maxKeys: 10 });
    const unknown = generateApiKey();

    await service.authenticate([`Bearer ${known}`]);
    await expect(service.authenticate([`Bearer ${known}`])).resolves.toEqual(client);
    await expect(service.authenticate([`Bearer ${unknown}`])).rejects.toMatchObject({ code: ErrorCode.Unauthenticated });
    await expect(service.authenticate([`Bearer ${unknown}`])).rejects.toMatchObject({ code: ErrorCode.Unauthenticated });

    expect(clients.findByKeyHash.mock.calls).toEqual([[hashApiKey(known)], [hashApiKey(unknown)], [hashApiKey(unknown)]]);
  });
});
