import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { Client } from 'pg';
import { databaseUrlNamed } from './support/scratch-database';
import { TEST_DATABASE_URL } from './support/test-env';

jest.setTimeout(60_000);

/** Every operator-facing script, as `npm run <name>` runs it from dist/. */
const SCRIPTS: [name: string, entry: string][] = [
  ['start:all', 'src/start-all.js'],
  ['migration:run', 'src/database/migrate.js'],
  ['client:create', 'src/clients/client-create.js'],
  ['client:key', 'src/clients/client-key.js'],
  ['client:list', 'src/clients/client-list.js'],
  ['payment:resolve', 'src/operator/payment-resolve.js'],
  ['refund:resolve', 'src/operator/refund-resolve.js'],
  ['webhook:deliveries', 'src/operator/webhook-deliveries.js'],
  ['webhook:redeliver', 'src/operator/webhook-redeliver.js'],
  ['secrets:reencrypt', 'src/operator/secrets-reencrypt.js'],
  ['payments:review', 'src/operator/payments-review.js'],
  ['audit', 'scripts/audit.js'],
  ['demo', 'scripts/demo.js'],
  ['chaos', 'scripts/chaos.js'],
  ['fuzz', 'scripts/fuzz.js'],
  ['model', 'scripts/model.js'],
  ['bench', 'scripts/bench.js'],
  ['bench:retention', 'scripts/bench-retention.js'],
  ['profile', 'scripts/profile.js'],
  ['settle-latency', 'scripts/settle-latency.js'],
  ['sim', 'scripts/sim.js'],
  ['openapi', 'scripts/openapi.js'],
  ['client:budget', 'scripts/client-budget.js'],
];

/**
 * `--help` is a question: every script answers it with its usage and exit 0,
 * and starts, creates or writes nothing (the database it would use is not
 * even created).
 */
describe('--help on every script', () => {
  const databaseName = `payments_test_help_${process.pid}`;

  async function databaseExists(): Promise<boolean> {
    const client = new Client({ connectionString: databaseUrlNamed(TEST_DATABASE_URL, 'postgres') });
    await client.connect();
    try {
      return (await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [databaseName])).rowCount === 1;
    } finally {
      await client.end();
    }
  }

  it.each(SCRIPTS)('npm run %s -- --help prints its usage and touches nothing', async (_name, entry) => {
    const result = spawnSync(process.execPath, [join(__dirname, '..', 'dist', entry), '--help'], {
      env: { ...process.env, DATABASE_URL: databaseUrlNamed(TEST_DATABASE_URL, databaseName), PORT: '1', PROVIDER_PORT: '1' },
      encoding: 'utf8',
      timeout: 20_000,
    });

    expect({ status: result.status, stderr: result.stderr }).toEqual({ status: 0, stderr: '' });
    expect(result.stdout).toMatch(/^usage: npm run /i);
    expect(await databaseExists()).toBe(false);
  });
});
