import { join } from 'node:path';
import { type FuzzSummary, runFuzz } from '../scripts/fuzz/engine';
import { runScript } from './support/run-script';
import { dropDatabase } from './support/scratch-database';
import { TEST_DATABASE_URL, assertTestDatabase, testConfig, uniqueQueuePrefix } from './support/test-env';

/** A new seed each run, in the test's name: a failure says which, and `npm run fuzz -- --seed S` replays it. */
const SEED = process.env.FUZZ_SEED === undefined ? Math.floor(Math.random() * 2 ** 31) : Number(process.env.FUZZ_SEED);
const RUNS = 2_000;
/** The run stops drawing after this, so a slow machine fails on the request count, not on jest's timeout. */
const MAX_SECONDS = 60;

/**
 * CI's short fuzz run: the engine of `npm run fuzz` (scripts/fuzz/), with the
 * API and the mock provider as real processes on the test database, two
 * clients of its own (whose rows alone it judges) and a queue prefix of its
 * own.
 */
describe('the fuzz suite (short)', () => {
  it(
    `sends ${RUNS} generated requests (seed ${SEED}): no 5xx, every error in the envelope, nothing of the other client's, nothing written by a refusal`,
    async () => {
      assertTestDatabase(TEST_DATABASE_URL);
      const summary: FuzzSummary = await runFuzz({
        runs: RUNS,
        seed: SEED,
        concurrency: 8,
        maxSeconds: MAX_SECONDS,
        databaseUrl: TEST_DATABASE_URL,
        redisUrl: testConfig().redisUrl,
        queuePrefix: uniqueQueuePrefix(),
        worker: false,
        examples: 3,
      });

      expect(summary).toMatchObject({
        seed: SEED,
        server_errors: 0,
        no_answers: 0,
        envelope_violations: 0,
        tenancy_violations: 0,
        write_violations: 0,
        contract_violations: 0,
        examples: [],
        ok: true,
      });
      expect(summary.requests).toBe(RUNS);
      // Enough of each kind went through for the zeros to mean something.
      for (const family of ['create', 'read', 'probe', 'path', 'event', 'http']) expect(summary.by_family[family]).toBeGreaterThan(50);
      expect(summary.payments_made).toBeGreaterThan(20);
      expect(summary.by_status['422']).toBeGreaterThan(0);
    },
    (MAX_SECONDS + 30) * 1_000,
  );
});

describe('npm run fuzz from a shell', () => {
  // The run's own database on the suite's server (its name says "fuzz" and "test").
  const database = `${new URL(TEST_DATABASE_URL).pathname.slice(1)}_fuzz`;

  afterAll(() => dropDatabase(TEST_DATABASE_URL, database));

  it('starts its worker with no SECRETS_KEY set: the run makes the key its production-mode processes need', async () => {
    const fuzz = join(__dirname, '..', 'dist', 'scripts', 'fuzz.js');
    const { code, stdout } = await runScript(fuzz, ['--runs', '40', '--worker', '--database', database, '--json'], {
      timeoutMs: 60_000,
      env: { ...process.env, SECRETS_KEY: undefined, DATABASE_URL: TEST_DATABASE_URL, REDIS_URL: testConfig().redisUrl },
    });

    expect(code).toBe(0);
    expect(JSON.parse(stdout)).toMatchObject({ requests: 40, server_errors: 0, ok: true });
  }, 70_000);
});
