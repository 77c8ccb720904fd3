import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { loadConfigOrExit } from '../src/config/app-config';
import { type ModelRunSummary, runModel } from '../test/support/model/run';
import { databaseUrlNamed, openMigratedDatabase } from '../test/support/scratch-database';

/**
 * `npm run model -- --runs N [--seed S]`: the model-based test's long run
 * (test/support/model/), against the API, the worker and the mock provider
 * as real processes. Exit 0: every sequence passed; 1: one failed (its
 * shrunk commands, seed and path are printed); 2: the run could not be made.
 *
 * Its database is created when missing and migrated, never emptied: each
 * sequence makes an API client of its own and the model judges only its
 * rows. Its queue prefix is new for each run and removed at the end.
 */

const USAGE = `Usage: npm run model -- [options]

  --runs N           sequences to run (default 200)
  --seed N           fast-check's seed (default: random, printed)
  --path P           replay one sequence of the seed, as a failure prints it
  --replay-path R    the commands' replay hint a failure prints (/*replayPath="R"*/)
  --commands N       commands per sequence, at most (default 25)
  --no-crashes       leave out the commands that kill or freeze API processes at crash points
  --max-seconds S    start no sequence after S seconds, whatever --runs says (default 1800)
  --shrink-runs N    sequences spent shrinking a failure, at most (default 200)
  --shrink-seconds S seconds spent shrinking a failure, at most (default 600)
  --database NAME    the run's database on the server of DATABASE_URL, created if missing and
                     never emptied; must contain "model" (default payments_model)
  --json             one JSON object instead of the text summary
  --help             this text

Exit 0: every sequence passed; 1: one failed; 2: the run could not be made.
`;

function int(flag: string, value: string, min: number, max: number): number {
  const n = Number(value);
  if (!/^\d+$/.test(value) || n < min || n > max) throw new Error(`--${flag} must be an integer from ${min} to ${max}`);
  return n;
}

function parseOptions(argv: string[]) {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      runs: { type: 'string', default: '200' },
      seed: { type: 'string' },
      path: { type: 'string' },
      'replay-path': { type: 'string' },
      commands: { type: 'string', default: '25' },
      'no-crashes': { type: 'boolean', default: false },
      'max-seconds': { type: 'string', default: '1800' },
      'shrink-runs': { type: 'string', default: '200' },
      'shrink-seconds': { type: 'string', default: '600' },
      database: { type: 'string', default: 'payments_model' },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) return 'help' as const;
  if (!/^[a-z0-9_]*model[a-z0-9_]*$/.test(values.database)) {
    throw new Error('--database must be lower-case letters, digits and underscores, and contain "model"');
  }
  if (values.path !== undefined && !/^\d+(:\d+)*$/.test(values.path)) throw new Error('--path must be a replay path such as 12 or 12:0:3');
  return {
    runs: int('runs', values.runs, 1, 10_000_000),
    seed: values.seed === undefined ? randomBytes(4).readUInt32BE() >>> 1 : int('seed', values.seed, 0, 2 ** 31 - 1),
    path: values.path,
    replayPath: values['replay-path'],
    maxCommands: int('commands', values.commands, 1, 1_000),
    crashes: !values['no-crashes'],
    maxSeconds: int('max-seconds', values['max-seconds'], 1, 7 * 86_400),
    shrinkRuns: int('shrink-runs', values['shrink-runs'], 0, 100_000),
    shrinkSeconds: int('shrink-seconds', values['shrink-seconds'], 0, 86_400),
    database: values.database,
    json: values.json,
  };
}

function text(summary: ModelRunSummary): string {
  const sorted = (counts: Record<string, number>) =>
    Object.entries(counts)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([k, n]) => `${k} ${n}`)
      .join(', ');
  const lines = [
    `model run ${summary.ok ? 'passed' : 'FAILED'}: seed ${summary.seed}`,
    `sequences    ${summary.sequences} run (${summary.sequencesBeforeFailure} before any failure)${summary.interrupted ? ', stopped by --max-seconds' : ''} in ${summary.seconds} s`,
    `steps        ${summary.steps}`,
    `requests     ${summary.requests}`,
    `commands     ${sorted(summary.commands)}`,
    `answers      ${sorted(summary.answers)}`,
    `faults       ${sorted(summary.faults)}`,
  ];
  if (summary.failure) lines.push('', summary.failure);
  return `${lines.join('\n')}\n`;
}

async function main(): Promise<number> {
  const options = parseOptions(process.argv.slice(2));
  if (options === 'help') {
    process.stdout.write(USAGE);
    return 0;
  }
  const base = loadConfigOrExit();
  const databaseUrl = databaseUrlNamed(base.databaseUrl, options.database);
  const progress = (line: string) => process.stderr.write(`model: ${line}\n`);
  const { dataSource, created } = await openMigratedDatabase(databaseUrl);
  await dataSource.destroy();
  progress(
    `seed ${options.seed}, ${options.runs} sequences of up to ${options.maxCommands} commands${options.crashes ? '' : ', no crash points'}, database ${options.database}${created ? ' (created)' : ''}`,
  );
  const summary = await runModel({
    ...options,
    databaseUrl,
    redisUrl: base.redisUrl,
    queuePrefix: `model-${randomBytes(4).toString('hex')}`,
    progress,
  });
  process.stdout.write(options.json ? `${JSON.stringify(summary)}\n` : text(summary));
  return summary.ok ? 0 : 1;
}

if (require.main === module) {
  main().then(
    (code) => process.exit(code),
    (error: unknown) => {
      process.stderr.write(`model run could not be made: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
      process.exit(2);
    },
  );
}
