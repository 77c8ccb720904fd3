import type { DataSource } from 'typeorm';
import { migrations } from '../../migrations/index';
import { databaseUrlNamed, dropDatabase, emptyTables, openScratchDatabase } from './scratch-database';
import { TEST_DATABASE_URL } from './test-env';

export interface BeforeMigration {
  /** Set once beforeAll has run. */
  readonly dataSource: DataSource;
  /** Takes the schema back to just before the migration: the later ones first, then it. */
  undoThrough(): Promise<void>;
}

/**
 * For a spec of one migration on rows written before it: a database of the
 * spec's own (`<test database>_<suffix>`, since the spec takes its schema
 * back), emptied and taken back to just before `migration` before each test,
 * brought up to date again after it, dropped at the end.
 */
export function useDatabaseBefore(migration: (typeof migrations)[number], suffix: string): BeforeMigration {
  const name = `${new URL(TEST_DATABASE_URL).pathname.slice(1)}_${suffix}`;
  const handle = {
    dataSource: undefined as unknown as DataSource,
    async undoThrough(): Promise<void> {
      const later = migrations.length - 1 - migrations.indexOf(migration);
      for (let undone = 0; undone <= later; undone++) await handle.dataSource.undoLastMigration({ transaction: 'all' });
    },
  };

  beforeAll(async () => {
    handle.dataSource = await openScratchDatabase(databaseUrlNamed(TEST_DATABASE_URL, name));
  }, 30_000);

  beforeEach(async () => {
    await emptyTables(handle.dataSource);
    await handle.undoThrough();
  });

  afterEach(async () => {
    await handle.dataSource.runMigrations({ transaction: 'all' });
  });

  afterAll(async () => {
    await handle.dataSource?.destroy();
    await dropDatabase(TEST_DATABASE_URL, name);
  }, 30_000);

  return handle;
}
