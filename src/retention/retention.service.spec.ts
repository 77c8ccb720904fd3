import type { DataSource, EntityManager } from 'typeorm';
import type { ClientsRepository } from '../clients/clients.repository';
import { strictMock } from '../common/strict-mock.fixture';
import { loadConfig } from '../config/app-config';
import type { EventsRepository } from '../merchant-events/events.repository';
import { Metrics } from '../metrics/metrics';
import type { ProcessedMessagesRepository } from '../provider-events/processed-messages.repository';
import { RetentionService } from './retention.service';

const DAY_MS = 86_400_000;

function setup(env: Record<string, string> = {}) {
  const db = {} as EntityManager;
  const dataSource = { manager: db } as DataSource;
  const clients = strictMock<ClientsRepository>('clients');
  const events = strictMock<EventsRepository>('events');
  const messages = strictMock<ProcessedMessagesRepository>('messages');
  const metrics = new Metrics();
  const config = loadConfig({ RETENTION_PRUNE_BATCH_SIZE: '10', ...env });
  const sut = new RetentionService(dataSource, clients, events, messages, config, metrics);
  const value = async (name: string, table: string) =>
    (await metrics.registry.getSingleMetric(name)!.get()).values.find((v) => v.labels.table === table)?.value;
  return { sut, db, clients, events, messages, metrics, value };
}

describe('RetentionService', () => {
  afterEach(() => jest.restoreAllMocks());

  it('prunes each client’s old events and old processed messages by their own retentions, and counts what it deleted', async () => {
    const { sut, db, clients, events, messages, value } = setup({ EVENTS_RETENTION_DAYS: '30', PROCESSED_MESSAGES_RETENTION_DAYS: '7.5' });
    jest.spyOn(Date, 'now').mockReturnValue(100 * DAY_MS);
    clients.ids = jest.fn().mockResolvedValue(['client_a', 'client_b']);
    events.pruneMadeBefore = jest
      .fn()
      .mockResolvedValueOnce({ events: 10, deliveries: 12 })
      .mockResolvedValueOnce({ events: 4, deliveries: 4 })
      .mockResolvedValueOnce({ events: 0, deliveries: 0 });
    messages.pruneOlderThan = jest.fn().mockResolvedValueOnce(2).mockResolvedValueOnce(5);

    expect(await sut.pruneExpired()).toEqual({ events: 14, deliveries: 16, processedMessages: 7 });

    expect(events.pruneMadeBefore.mock.calls).toEqual([
      [db, 'client_a', 70 * DAY_MS, 10],
      [db, 'client_a', 70 * DAY_MS, 10],
      [db, 'client_b', 70 * DAY_MS, 10],
    ]);
    expect(messages.pruneOlderThan.mock.calls).toEqual([
      [db, 'client_a', 7.5 * DAY_MS, 10],
      [db, 'client_b', 7.5 * DAY_MS, 10],
    ]);
    expect(await value('retention_pruned_total', 'events')).toBe(14);
    expect(await value('retention_pruned_total', 'webhook_deliveries')).toBe(16);
    expect(await value('retention_pruned_total', 'processed_messages')).toBe(7);
    // Not stubbed, so not called: a run that finished has no backlog to count.
    expect(await value('retention_backlog', 'events')).toBe(0);
    expect(await value('retention_backlog', 'processed_messages')).toBe(0);
  });

  it('stops on its budget and reports what it left as the backlog', async () => {
    const { sut, clients, events, messages, value } = setup({ RETENTION_PRUNE_RUN_BUDGET_MS: '1000' });
    let now = 0;
    jest.spyOn(Date, 'now').mockImplementation(() => now);
    clients.ids = jest.fn().mockResolvedValue(['client_a', 'client_b']);
    events.pruneMadeBefore = jest.fn(async (_db: EntityManager, _clientId: string, _madeBefore: number, _limit: number) => {
      now += 600;
      return { events: 10, deliveries: 10 };
    });
    messages.pruneOlderThan = jest.fn().mockResolvedValue(0);
    events.countMadeBefore = jest.fn().mockResolvedValue(5_000);
    messages.countOlderThan = jest.fn().mockResolvedValue(0);

    expect(await sut.pruneExpired()).toEqual({ events: 20, deliveries: 20, processedMessages: 0 });

    expect(events.countMadeBefore.mock.calls.map(([, clientId]) => clientId)).toEqual(['client_a', 'client_b']);
    expect(await value('retention_backlog', 'events')).toBe(10_000);
    expect(await value('retention_backlog', 'processed_messages')).toBe(0);
  });
});
