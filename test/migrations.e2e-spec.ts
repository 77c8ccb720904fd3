import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { Client } from 'pg';
import { databaseUrlNamed, openScratchDatabase } from './support/scratch-database';
import { TEST_DATABASE_URL } from './support/test-env';

/** The migration command as an operator runs it (dist/, a database of this spec's own). */
// Four runs of the command, each a process of its own: longer than jest's 5 s on a busy machine.
jest.setTimeout(30_000);

describe('npm run migration:run / migration:revert', () => {
  const databaseName = `payments_test_migrations_${process.pid}`;
  const databaseUrl = databaseUrlNamed(TEST_DATABASE_URL, databaseName);
  const adminUrl = databaseUrlNamed(TEST_DATABASE_URL, 'postgres');

  function migrateCommand(...args: string[]) {
    return spawnSync(process.execPath, [join(__dirname, '../dist/src/database/migrate.js'), ...args], {
      env: { ...process.env, DATABASE_URL: databaseUrl },
      encoding: 'utf8',
    });
  }

  async function adminQuery<T>(sql: string, params: unknown[] = []): Promise<T[]> {
    const client = new Client({ connectionString: adminUrl });
    await client.connect();
    try {
      return (await client.query(sql, params)).rows as T[];
    } finally {
      await client.end();
    }
  }

  async function dropDatabase(): Promise<void> {
    await adminQuery(`DROP DATABASE IF EXISTS ${databaseName} WITH (FORCE)`);
  }

  afterAll(dropDatabase);

  it('--help prints the usage and touches no database', async () => {
    await dropDatabase();

    const help = migrateCommand('--help');

    expect(help.status).toBe(0);
    expect(help.stdout).toContain('--confirm NAME');
    expect(await adminQuery('SELECT 1 FROM pg_database WHERE datname = $1', [databaseName])).toHaveLength(0);
  });

  it('reverts only the migration the operator names, the last applied one', async () => {
    await (await openScratchDatabase(databaseUrl)).destroy();
    const schemaState = async () => {
      const client = new Client({ connectionString: databaseUrl });
      await client.connect();
      try {
        // Every column, constraint and function, so that a migration that changes keys or
        // functions rather than tables shows too.
        const { rows } = await client.query(
          `SELECT (SELECT string_agg(table_name || '.' || column_name, ',' ORDER BY table_name, column_name)
                     FROM information_schema.columns WHERE table_schema = 'public') AS columns,
                  (SELECT string_agg(conrelid::regclass || ' ' || pg_get_constraintdef(oid), ',' ORDER BY conrelid::regclass::text, conname)
                     FROM pg_constraint WHERE connamespace = 'public'::regnamespace) AS constraints,
                  (SELECT string_agg(pg_get_functiondef(oid), ',' ORDER BY proname)
                     FROM pg_proc WHERE pronamespace = 'public'::regnamespace) AS functions`,
        );
        const [last] = (await client.query('SELECT name FROM typeorm_migrations ORDER BY id DESC LIMIT 1')).rows;
        return { schema: [rows[0].columns, rows[0].constraints, rows[0].functions].join('\n'), last: last.name as string };
      } finally {
        await client.end();
      }
    };
    const before = await schemaState();

    const unconfirmed = migrateCommand('--revert');
    const wrong = migrateCommand('--revert', '--confirm', 'InitialSchema1795942800000');

    for (const refused of [unconfirmed, wrong]) {
      expect(refused.status).toBe(2);
      expect(JSON.parse(refused.stderr)).toMatchObject({ msg: 'nothing reverted', last_applied: before.last });
    }
    expect(await schemaState()).toEqual(before);

    const confirmed = migrateCommand('--revert', '--confirm', before.last);

    expect(confirmed.status).toBe(0);
    expect(JSON.parse(confirmed.stdout)).toEqual({ msg: 'migration reverted', reverted: before.last });
    // Reverting the last migration undoes what it made, and migrating again restores it exactly.
    expect((await schemaState()).schema).not.toEqual(before.schema);
    expect(migrateCommand().status).toBe(0);
    expect(await schemaState()).toEqual(before);
  });
});
