import 'reflect-metadata';
import { parseArgs } from 'node:util';
import { loadConfigOrExit } from '../config/app-config';
import type { DataSource } from 'typeorm';
import { MIGRATIONS_TABLE, createDataSource } from './data-source';
import { ensureDatabase } from './ensure-database';

// Any constant shared by every migration runner; two runners (say, two
// containers starting together) take turns instead of racing on the schema.
const MIGRATION_LOCK = 7_311_002;

/** Applies the pending migrations under a Postgres advisory lock; returns their names. */
export async function migrate(dataSource: DataSource): Promise<string[]> {
  return underMigrationLock(dataSource, async () => {
    const applied = await dataSource.runMigrations({ transaction: 'all' });
    return applied.map((migration) => migration.name);
  });
}

/**
 * Reverts the last applied migration, and only when it is `confirmed`: a
 * revert drops what that migration made (reverting the first one drops every
 * table), so the operator names what they mean to undo. Returns what was last
 * applied, and whether it was reverted.
 */
export async function revertLast(
  dataSource: DataSource,
  confirmed: string | undefined,
): Promise<{ last: string | undefined; reverted: boolean }> {
  return underMigrationLock(dataSource, async () => {
    const [row] = (await dataSource.query(
      `SELECT name FROM ${MIGRATIONS_TABLE} ORDER BY id DESC LIMIT 1`,
    )) as { name: string }[];
    const last = row?.name;
    if (last === undefined || last !== confirmed) return { last, reverted: false };
    await dataSource.undoLastMigration({ transaction: 'all' });
    return { last, reverted: true };
  });
}

async function underMigrationLock<T>(dataSource: DataSource, work: () => Promise<T>): Promise<T> {
  const runner = dataSource.createQueryRunner();
  try {
    await runner.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
    return await work();
  } finally {
    await runner.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]);
    await runner.release();
  }
}

const USAGE = `usage: npm run migration:run                       apply the pending migrations
       npm run migration:revert                    say which migration a revert would undo
       npm run migration:revert -- --confirm NAME  undo it (NAME: the last applied migration)
Reads DATABASE_DIRECT_URL, else DATABASE_URL (and .env where present); migration:run creates the database if it is missing.
`;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { revert: { type: 'boolean' }, confirm: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
  });
  if (values.help) {
    process.stdout.write(USAGE);
    return;
  }
  const config = loadConfigOrExit();
  // The advisory lock is a session's: through a transaction-pooling PgBouncer
  // the lock, the migrations and the unlock could each land on another server
  // connection, and the lock stay held by one of them.
  const direct = { databaseUrl: config.databaseDirectUrl };
  if (!values.revert) await ensureDatabase(direct.databaseUrl);
  const dataSource = await createDataSource(direct).initialize();
  try {
    if (!values.revert) {
      const applied = await migrate(dataSource);
      process.stdout.write(`${JSON.stringify({ msg: 'migrations done', applied })}\n`);
      return;
    }
    const { last, reverted } = await revertLast(dataSource, values.confirm);
    if (reverted) {
      process.stdout.write(`${JSON.stringify({ msg: 'migration reverted', reverted: last })}\n`);
      return;
    }
    const why = last === undefined ? 'no migration is applied' : `run again with --confirm ${last} to revert it`;
    process.stderr.write(`${JSON.stringify({ msg: 'nothing reverted', last_applied: last ?? null, why })}\n`);
    process.exitCode = 2;
  } finally {
    await dataSource.destroy();
  }
}

if (require.main === module) {
  main().catch((error: unknown) => {
    process.stderr.write(`migration failed: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  });
}
