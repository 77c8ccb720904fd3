import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { loadConfigOrExit } from '../src/config/app-config';
import { type FuzzSummary, runFuzz } from './fuzz/engine';
import { databaseUrlNamed, openMigratedDatabase } from '../test/support/scratch-database';

/**
 * `npm run fuzz -- --runs N [--seed S] [--json]`: the property-based fuzz run
 * against the API, the mock provider (and with --worker the worker) as real
 * processes. Exit 0: no violation; 1: a violation; 2: the run could not be made.
 *
 * Its database is created when missing and migrated, never emptied: the run
 * makes two API clients of its own and judges only their rows, so a database
 * it finds (its own from an earlier run, or any other) loses nothing. Its
 * queue prefix is new for each run and removed at the end.
 */

const USAGE = `Usage: npm run fuzz -- [options]

  --runs N          requests to send (default 10000)
  --seed N          fast-check's seed (default: random, printed)
  --concurrency N   requests per batch, sent at once (default 8); a replay needs the same
  --path P          replay one batch of the seed, as printed with a violation
  --max-seconds S   stop drawing batches after S seconds, whatever --runs says (default 1500)
  --database NAME   the run's database on the server of DATABASE_URL, created if missing and
                    never emptied; must contain "fuzz" (default payments_fuzz)
  --worker          run the reconciliation worker too
  --examples N      violations shown per kind (default 5)
  --json            one JSON object instead of the text summary
  --help            this text

Exit 0: no violation; 1: a violation; 2: the run could not be made.
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
      runs: { type: 'string', default: '10000' },
      seed: { type: 'string' },
      concurrency: { type: 'string', default: '8' },
      path: { type: 'string' },
      'max-seconds': { type: 'string', default: '1500' },
      database: { type: 'string', default: 'payments_fuzz' },
      worker: { type: 'boolean', default: false },
      examples: { type: 'string', default: '5' },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) return 'help' as const;
  if (!/^[a-z0-9_]*fuzz[a-z0-9_]*$/.test(values.database)) {
    throw new Error('--database must be lower-case letters, digits and underscores, and contain "fuzz"');
  }
  if (values.path !== undefined && !/^\d+(:\d+)*$/.test(values.path)) throw new Error('--path must be a replay path such as 12 or 12:0');
  return {
    runs: int('runs', values.runs, 1, 10_000_000),
    seed: values.seed === undefined ? randomBytes(4).readUInt32BE() >>> 1 : int('seed', values.seed, 0, 2 ** 31 - 1),
    concurrency: int('concurrency', values.concurrency, 1, 64),
    path: values.path,
    maxSeconds: int('max-seconds', values['max-seconds'], 1, 86_400),
    database: values.database,
    worker: values.worker,
    examples: int('examples', values.examples, 0, 100),
    json: values.json,
  };
}

function text(summary: FuzzSummary): string {
  const rate = summary.seconds > 0 ? Math.round(summary.requests / summary.seconds) : 0;
  const lines = [
    `fuzz ${summary.ok ? 'passed' : 'FAILED'}: seed ${summary.seed}, concurrency ${summary.concurrency}`,
    `requests     ${summary.requests} in ${summary.seconds} s (${rate}/s)${summary.interrupted ? ', stopped by --max-seconds' : ''}`,
    `by class     ${Object.entries(summary.by_status_class).sort().map(([k, n]) => `${k} ${n}`).join(', ')}`,
    `by status    ${Object.entries(summary.by_status).sort().map(([k, n]) => `${k} ${n}`).join(', ')}`,
    `by family    ${Object.entries(summary.by_family).sort().map(([k, n]) => `${k} ${n}`).join(', ')}`,
    `payments     ${summary.payments_made} made by the two clients`,
    `5xx          ${summary.server_errors}`,
    `no answer    ${summary.no_answers}`,
    `envelope     ${summary.envelope_violations} violations`,
    `tenancy      ${summary.tenancy_violations} violations`,
    `writes       ${summary.write_violations} violations`,
    `contract     ${summary.contract_violations} violations`,
  ];
  for (const example of summary.examples) {
    lines.push(
      '',
      `${example.kind}: ${example.message}`,
      `  replay:  npm run fuzz -- ${example.replay}`,
      `  request: ${example.request}`,
      `  answer:  ${example.answer}`,
      ...(example.api_log ?? []).map((line) => `  api log: ${line}`),
    );
  }
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
  const progress = (line: string) => process.stderr.write(`fuzz: ${line}\n`);
  const { dataSource, created } = await openMigratedDatabase(databaseUrl);
  await dataSource.destroy();
  progress(`seed ${options.seed}, ${options.runs} requests in batches of ${options.concurrency}, database ${options.database}${created ? ' (created)' : ''}`);
  const summary = await runFuzz({
    ...options,
    databaseUrl,
    redisUrl: base.redisUrl,
    queuePrefix: `fuzz-${randomBytes(4).toString('hex')}`,
    progress,
  });
  process.stdout.write(options.json ? `${JSON.stringify(summary)}\n` : text(summary));
  return summary.ok ? 0 : 1;
}

if (require.main === module) {
  main().then(
    (code) => process.exit(code),
    (error: unknown) => {
      process.stderr.write(`fuzz run could not be made: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
      process.exit(2);
    },
  );
}
