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
