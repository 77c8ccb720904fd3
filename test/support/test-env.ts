import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { SecretBox } from '../../src/common/secret-box';
import { onboardClient } from '../../src/merchant-events/client-onboarding';
import { type AppConfig, loadConfig, secretsConfig } from '../../src/config/app-config';
import { databaseUrlNamed } from './scratch-database';
import { dropWorkerQueues } from './worker-queues';

/**
 * What the in-process app and the process stack share: the test database,
 * its configuration, the queue prefix a file keeps to itself, and API clients.
 */

/**
 * The run's database: TEST_DATABASE_URL when set, else payments_test on the
 * local server. Never DATABASE_URL: one exported for a development stack must
 * not become the database the suite empties.
 */
export const SUITE_DATABASE_URL = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/payments_test';

/**
 * The database of jest worker `workerId`: the run's own for worker 1 (and
 * outside jest's workers), else the run's name with `_w<id>` (payments_test_w2),
 * so that files running at once in two workers never empty each other's tables.
 * test/global-setup.ts creates and migrates one per worker.
 */
export function workerDatabaseUrl(suiteUrl: string, workerId: string | undefined): string {
  if (workerId === undefined || workerId === '1') return suiteUrl;
  if (!/^[1-9][0-9]*$/.test(workerId)) throw new Error(`Unexpected JEST_WORKER_ID "${workerId}"`);
  return databaseUrlNamed(suiteUrl, `${new URL(suiteUrl).pathname.slice(1)}_w${workerId}`);
}

/** The suite's database in this process: its jest worker's (see workerDatabaseUrl). */
export const TEST_DATABASE_URL = workerDatabaseUrl(SUITE_DATABASE_URL, process.env.JEST_WORKER_ID);
// What the specs spawn inherits the suite's database, whatever the shell exported.
process.env.DATABASE_URL = TEST_DATABASE_URL;
// A secrets key of the suite's own (not the development default), which every process it spawns shares.
process.env.SECRETS_KEY ??= 'dGhlIHRlc3Qgc3VpdGUncyBvd24gc2VjcmV0cyBrZXk=';
// Every merchant endpoint a spec serves is on loopback, which the worker
// refuses by default: the specs' workers and client creations allow it, and
// the specs of the refusal itself say false.
process.env.WEBHOOK_ALLOW_PRIVATE_URLS = 'true';

/** The suite truncates tables: it refuses any database whose name does not say "test". */
export function assertTestDatabase(url: string): void {
  const name = new URL(url).pathname.replace(/^\//, '');
  if (!name.includes('test')) {
    throw new Error(`Refusing to run e2e tests against database "${name}": its name must contain "test".`);
  }
}

/** A full configuration for a test, on the test database, quiet unless LOG_LEVEL says otherwise. */
export function testConfig(overrides: Record<string, string> = {}): AppConfig {
  assertTestDatabase(TEST_DATABASE_URL);
  return loadConfig({
    ...process.env,
    NODE_ENV: 'test',
    LOG_LEVEL: process.env.LOG_LEVEL ?? 'silent',
    DATABASE_URL: TEST_DATABASE_URL,
    // Several APIs and workers run in one test process: each takes free metrics ports.
    METRICS_PORT: '0',
    WORKER_METRICS_PORT: '0',
    ...overrides,
  });
}

/** A queue prefix of its own per test file, so runs never see each other's jobs. */
export function uniqueQueuePrefix(): string {
  return `test-${randomUUID().slice(0, 8)}`;
}

/** Removes every BullMQ key under the prefix (job schedulers included), of every queue the worker uses. */
export function dropQueue(config: AppConfig): Promise<void> {
  return dropWorkerQueues(config.redisUrl, config.queuePrefix);
}

export async function createClient(
  dataSource: DataSource,
  name = 'test client',
  options: { webhookUrl?: string } = {},
): Promise<{ id: string; apiKey: string; webhookSecret?: string }> {
  const client = await onboardClient(dataSource, { box: new SecretBox(secretsConfig()), policy: { allowPrivate: true } }, name, options);
  return { id: client.id, apiKey: client.api_key, webhookSecret: client.webhook_secret };
}
