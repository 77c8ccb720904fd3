import type { DataSource, EntityManager } from 'typeorm';
import { strictMock } from '../common/strict-mock.fixture';
import { type AppConfig, loadConfig } from '../config/app-config';
import type { IdempotencyRepository } from '../idempotency/idempotency.repository';
import type { EventsRepository } from '../merchant-events/events.repository';
import type { PaymentsRepository } from '../payments/payments.repository';
import type { Payment } from '../payments/payments.table';
import type { ProviderClient } from '../provider/provider.client';
import { Ledger } from './ledger.service';

/**
 * What the unit specs of every writer build on: strict mocks of the
 * repositories and the provider, a DataSource whose transactions run on one
 * fake manager, and the real ledger over them, whose fenced writes are part
 * of every flow under test. The outbox write is stubbed here, because every
 * transition makes it: a spec reads `events.recordPaymentChange` to see
 * which changes were announced.
 */
export function ledgerMocks(env: Record<string, string> = {}): {
  db: EntityManager;
  transaction: jest.Mock;
  dataSource: DataSource;
  keys: jest.Mocked<IdempotencyRepository>;
  payments: jest.Mocked<PaymentsRepository>;
  events: jest.Mocked<EventsRepository>;
  provider: jest.Mocked<ProviderClient>;
  config: AppConfig;
  ledger: Ledger;
} {
  const db = {} as EntityManager;
  const transaction = jest.fn((work: (em: EntityManager) => unknown) => work(db));
  const dataSource = { manager: db, transaction } as unknown as DataSource;
  const keys = strictMock<IdempotencyRepository>('keys');
  const payments = strictMock<PaymentsRepository>('payments');
  const events = strictMock<EventsRepository>('events');
  events.recordPaymentChange = jest.fn(async (_db: EntityManager, _payment: Payment) => undefined);
  const config = loadConfig(env);
  const ledger = new Ledger(dataSource, keys, payments, events, config);
  return { db, transaction, dataSource, keys, payments, events, provider: strictMock<ProviderClient>('provider'), config, ledger };
}
