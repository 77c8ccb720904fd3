import type { DataSource, EntityManager } from 'typeorm';
import { strictMock } from '../common/strict-mock.fixture';
import { type AppConfig, loadConfig } from '../config/app-config';
import type { IdempotencyRepository } from '../idempotency/idempotency.repository';
import type { PaymentsRepository } from '../payments/payments.repository';
import type { ProviderClient } from '../provider/provider.client';
import { Ledger } from './ledger.service';

/**
 * What the unit specs of every writer build on: strict mocks of the two
 * repositories and the provider, a DataSource whose transactions run on one
 * fake manager, and the real ledger over them, whose fenced writes are part
 * of every flow under test.
 */
export function ledgerMocks(env: Record<string, string> = {}): {
  db: EntityManager;
  transaction: jest.Mock;
  dataSource: DataSource;
  keys: jest.Mocked<IdempotencyRepository>;
  payments: jest.Mocked<PaymentsRepository>;
  provider: jest.Mocked<ProviderClient>;
  config: AppConfig;
  ledger: Ledger;
} {
  const db = {} as EntityManager;
  const transaction = jest.fn((work: (em: EntityManager) => unknown) => work(db));
  const dataSource = { manager: db, transaction } as unknown as DataSource;
  const keys = strictMock<IdempotencyRepository>('keys');
  const payments = strictMock<PaymentsRepository>('payments');
  const config = loadConfig(env);
  const ledger = new Ledger(dataSource, keys, payments, config);
  return { db, transaction, dataSource, keys, payments, provider: strictMock<ProviderClient>('provider'), config, ledger };
}
