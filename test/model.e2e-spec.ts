import { type ModelRunSummary, runModel } from './support/model/run';
import { TEST_DATABASE_URL, assertTestDatabase, testConfig, uniqueQueuePrefix } from './support/test-env';

/** A new seed each run, in the test's name: a failure prints it, and `npm run model -- --seed S` replays it. */
const SEED = process.env.MODEL_SEED === undefined ? Math.floor(Math.random() * 2 ** 31) : Number(process.env.MODEL_SEED);
const SEQUENCES = 8;
const MAX_COMMANDS = 12;
/** No sequence starts after this, so a slow machine runs fewer, never into jest's timeout. */
const MAX_SECONDS = 40;

/**
 * CI's short model-based run (test/support/model/, the engine of
 * `npm run model`): random sequences of payments and refunds under fresh and
 * reused keys, concurrent duplicates, provider faults by test card, API
 * processes killed or frozen at crash points, the worker paused, killed or
 * crashed mid-job, provider events delivered again, keys expired, each step
 * checked against the reference model, the store and the provider. The
 * API, the worker and the mock provider are real processes on the test
 * database, each sequence an API client of its own.
 */
describe('the model-based test (short)', () => {
  it(
    `runs ${SEQUENCES} sequences of up to ${MAX_COMMANDS} commands (seed ${SEED}) with every answer one the contract allows`,
    async () => {
      assertTestDatabase(TEST_DATABASE_URL);
      const summary: ModelRunSummary = await runModel({
        runs: SEQUENCES,
        seed: SEED,
        maxCommands: MAX_COMMANDS,
        crashes: true,
        shrinkRuns: 30,
        shrinkSeconds: 60,
        maxSeconds: MAX_SECONDS,
        databaseUrl: TEST_DATABASE_URL,
        redisUrl: testConfig().redisUrl,
        queuePrefix: uniqueQueuePrefix(),
      });

      if (summary.failure) {
        const path = /path: "([\d:]+)"/.exec(summary.failure)?.[1];
        const replayPath = /replayPath="([^"]+)"/.exec(summary.failure)?.[1];
        const replay = `--seed ${SEED} --commands ${MAX_COMMANDS}${path ? ` --path ${path}` : ''}${replayPath ? ` --replay-path '${replayPath}'` : ''}`;
        throw new Error(`${summary.failure}\n\nReplay: npm run model -- ${replay}`);
      }
      expect(summary.ok).toBe(true);
      expect(summary.sequencesBeforeFailure).toBeGreaterThan(0);
      expect(summary.steps).toBeGreaterThan(summary.sequences);
    },
    (MAX_SECONDS + 60 + 60) * 1_000,
  );
});
