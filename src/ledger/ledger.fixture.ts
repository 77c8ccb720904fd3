import type { DataSource, EntityManager } from 'typeorm';
import { strictMock } from '../common/strict-mock.fixture';
import { type AppConfig, loadConfig } from '../config/app-config';
import type { IdempotencyRepository } from './idempotency.repository';
import { decidedAs } from './payment-outcome';
import type { Decided, PaymentsRepository } from './payments.repository';
import type { Payment } from './payments.table';
import type { ProviderClient } from '../provider/provider.client';
import { Ledger } from './ledger.service';

/**
 * What the unit specs of every writer build on: strict mocks of the
 * repositories and the provider, a DataSource whose transactions run on one
 * fake manager, and the real ledger over them, whose fenced writes are part
 * of every flow under test. A spec stubs the fenced statements it expects
 * (payments.recordOutcomeUnderLease, payments.postponeUnderLease) and reads
 * what they were sent.
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

/**
 * PaymentsRepository.recordOutcomeUnderLease as Postgres answers it while
 * the lease holds and the payment can move: the payment as the decision
 * leaves it, updated now, and the response its key stores, with the full
 * retention left.
 */
export function recordsOutcomes(): jest.MockedFunction<PaymentsRepository['recordOutcomeUnderLease']> {
  return jest.fn(async (_db, _lease, payment, decision): Promise<Decided> => {
    const now = new Date();
    const moved = { ...decidedAs(payment as Payment, decision.outcome), updatedAt: now };
    const { answer } = decision;
    if (!answer) return { kind: 'recorded', payment: moved };
    const body = answer.body.before + JSON.stringify(now.toISOString()) + answer.body.after;
    return { kind: 'recorded', payment: moved, response: { status: answer.status, body }, expiresInMs: answer.ttlHours * 3_600_000 };
  });
}
