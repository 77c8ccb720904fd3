import { strictMock } from '../common/strict-mock.fixture';
import { ApiKeyUsage } from './api-key-usage';
import type { ClientsRepository } from './clients.repository';

describe('ApiKeyUsage', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  function sut(flushMs = 1_000) {
    const clients = strictMock<ClientsRepository>('ClientsRepository');
    const written: Map<string, Date>[] = [];
    clients.recordUsage = jest.fn(async (uses: ReadonlyMap<string, Date>) => {
      written.push(new Map(uses));
    });
    return { usage: new ApiKeyUsage(clients, flushMs), clients, written };
  }

  it('writes many uses of many keys as one statement per interval, with the latest use of each', async () => {
    const { usage, clients, written } = sut();

    for (let i = 0; i < 1_000; i++) usage.record(i % 2 === 0 ? 'key_a' : 'key_b', new Date(i));
    expect(clients.recordUsage).not.toHaveBeenCalled();
    await jest.advanceTimersByTimeAsync(1_000);

    expect(written).toEqual([new Map([['key_a', new Date(998)], ['key_b', new Date(999)]])]);
  });

  it('writes nothing while no key is used', async () => {
    const { usage, clients } = sut();

    await jest.advanceTimersByTimeAsync(10_000);
    await usage.beforeApplicationShutdown();

    expect(clients.recordUsage).not.toHaveBeenCalled();
  });

  it('keeps the uses of a failed write for the next one, without losing a later use', async () => {
    const { usage, clients, written } = sut();
    clients.recordUsage.mockRejectedValueOnce(new Error('connect ECONNREFUSED'));

    usage.record('key_a', new Date(1));
    usage.record('key_b', new Date(2));
    await jest.advanceTimersByTimeAsync(1_000);
    usage.record('key_b', new Date(3));
    await jest.advanceTimersByTimeAsync(1_000);

    expect(clients.recordUsage).toHaveBeenCalledTimes(2);
    expect(written).toEqual([new Map([['key_b', new Date(3)], ['key_a', new Date(1)]])]);
  });

  it('flushes what is left when the process stops', async () => {
    const { usage, written } = sut(60_000);

    usage.record('key_a', new Date(5));
    await usage.beforeApplicationShutdown();

    expect(written).toEqual([new Map([['key_a', new Date(5)]])]);
  });
});
