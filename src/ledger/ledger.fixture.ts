import type { DataSource, EntityManager } from 'typeorm';
import { strictMock } from '../common/strict-mock.fixture';
import { type AppConfig, loadConfig } from '../config/app-config';
import type { IdempotencyRepository } from './idempotency.repository';
import type { Lease } from './lease';
import type { Operation, OperationRow, RowRef } from './operation';
import type { Decided, Decision, OperationsRepository } from './operations.repository';
import { decidedAs } from './outcome';
import type { PaymentsRepository } from './payments.repository';
import type { ProviderClient } from '../provider/provider.client';
import { Ledger } from './ledger.service';

/**
 * What the unit specs of every writer build on: strict mocks of the
 * repositories and the provider, a DataSource whose transactions run on one
 * fake manager, and the real ledger over them, whose fenced writes are part
 * of every flow under test. A spec stubs the fenced statements it expects
 * (rows.recordOutcomeUnderLease, rows.postponeUnderLease: the statements
 * every operation shares) and reads what they were sent; `payments` is the
 * payments table's own repository (the claim, the reads by id).
 */
export function ledgerMocks(env: Record<string, string> = {}): {
  db: EntityManager;
  transaction: jest.Mock;
  dataSource: DataSource;
  keys: jest.Mocked<IdempotencyRepository>;
  rows: jest.Mocked<OperationsRepository>;
  payments: jest.Mocked<PaymentsRepository>;
  provider: jest.Mocked<ProviderClient>;
  config: AppConfig;
  ledger: Ledger;
} {
  const db = {} as EntityManager;
  const transaction = jest.fn((work: (em: EntityManager) => unknown) => work(db));
  const dataSource = { manager: db, transaction } as unknown as DataSource;
  const keys = strictMock<IdempotencyRepository>('keys');
  const rows = strictMock<OperationsRepository>('rows');
  const payments = strictMock<PaymentsRepository>('payments');
  const config = loadConfig(env);
  const ledger = new Ledger(dataSource, keys, rows, config);
  return { db, transaction, dataSource, keys, rows, payments, provider: strictMock<ProviderClient>('provider'), config, ledger };
}

/**
 * OperationsRepository.recordOutcomeUnderLease as Postgres answers it while
 * the lease holds and the row can move: the row as the decision leaves it
 * (for the operation it was sent), updated now, and the response its key
 * stores, with the full retention left.
 */
export function recordsOutcomes(): jest.MockedFunction<OperationsRepository['recordOutcomeUnderLease']> {
  async function recorded<R extends OperationRow>(
    _db: EntityManager,
    operation: Operation<R>,
    _lease: Lease,
    ref: RowRef,
    decision: Decision,
  ): Promise<Decided<R>> {
    const now = new Date();
    const moved = { ...decidedAs(operation, ref as R, decision.outcome), updatedAt: now };
    const { answer } = decision;
    if (!answer) return { kind: 'recorded', row: moved };
    const body = answer.body.before + JSON.stringify(now.toISOString()) + answer.body.after;
    return { kind: 'recorded', row: moved, response: { status: answer.status, body }, expiresInMs: answer.ttlHours * 3_600_000 };
  }
  return jest.fn(recorded) as jest.MockedFunction<typeof recorded>;
}
