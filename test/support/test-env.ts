import { type AppConfig, loadConfig } from '../../src/config/app-config';

/** The e2e database: DATABASE_URL when set, else payments_test on the local server. */
export const TEST_DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/payments_test';

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
    ...overrides,
  });
}
