import 'reflect-metadata';
import { loadConfigOrExit } from '../config/app-config';
import type { DataSource } from 'typeorm';
import { createDataSource } from './data-source';
import { ensureDatabase } from './ensure-database';

// Any constant shared by every migration runner; two runners (say, two
// containers starting together) take turns instead of racing on the schema.
const MIGRATION_LOCK = 7_311_002;

/** Applies (or reverts the last of) the migrations under a Postgres advisory lock. */
export async function migrate(dataSource: DataSource, direction: 'up' | 'revert' = 'up'): Promise<string[]> {
  const runner = dataSource.createQueryRunner();
  try {
    await runner.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
    if (direction === 'revert') {
      await dataSource.undoLastMigration({ transaction: 'all' });
      return [];
    }
    const applied = await dataSource.runMigrations({ transaction: 'all' });
    return applied.map((migration) => migration.name);
  } finally {
    await runner.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]);
    await runner.release();
  }
}

/** `npm run migration:run` applies pending migrations; `--revert` undoes the last one. */
async function main(): Promise<void> {
  const config = loadConfigOrExit();
  await ensureDatabase(config.databaseUrl);
  const dataSource = await createDataSource(config).initialize();
  try {
    const direction = process.argv.includes('--revert') ? 'revert' : 'up';
    const applied = await migrate(dataSource, direction);
    process.stdout.write(`${JSON.stringify({ msg: 'migrations done', direction, applied })}\n`);
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
