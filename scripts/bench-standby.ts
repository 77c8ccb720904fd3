import { execFile } from 'node:child_process';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { type Figures, round } from './bench/measure';
import type { PrivatePostgres } from './lib/private-postgres';
import { STANDBY_NAME, startReplicatedPostgres } from './lib/private-standby';

/**
 * `npm run bench:standby -- [bench options]`: what waiting for a synchronous
 * standby costs a create. One private primary streams to a hot standby
 * (scripts/lib/private-standby.ts); the bench's create scenario runs against
 * the primary twice, first with synchronous_commit = on (each commit waits
 * until the standby has flushed it), then with synchronous_commit = local
 * (the same standby still streaming, no commit waiting for it). The options
 * (--seconds, --warmup, --connections) go to both runs. One JSON line.
 */
const run = promisify(execFile);
const BENCH = join(__dirname, 'bench.js');
const DATABASE = 'payments_bench_standby';

interface CreateFigures extends Pick<Figures, 'rps' | 'p50_ms' | 'p99_ms' | 'errors' | 'non_2xx'> {
  /** The standby as the primary sees it after the run (`streaming sync`): it streamed, as the synchronous standby, throughout. */
  standby: string;
}

async function main(): Promise<void> {
  const loadAtStart = loadavg().map((value) => round(value));
  const postgres = await startReplicatedPostgres();
  try {
    const on = await createFigures(postgres.primary, 'on');
    const local = await createFigures(postgres.primary, 'local');
    const report = {
      synchronous_commit_on: on,
      synchronous_commit_local: local,
      rps_on_over_local: round(on.rps / local.rps),
      load_average_at_start: loadAtStart,
      load_average_at_end: loadavg().map((value) => round(value)),
    };
    process.stdout.write(`${JSON.stringify(report)}\n`);
  } finally {
    await postgres.destroy();
  }
}

/** The bench's create scenario against the primary, its commits under `synchronousCommit`. */
async function createFigures(primary: PrivatePostgres, synchronousCommit: 'on' | 'local'): Promise<CreateFigures> {
  await primary.configure({ synchronous_commit: synchronousCommit });
  const args = [BENCH, '--scenarios', 'create', '--database', DATABASE, '--json', ...process.argv.slice(2)];
  const { stdout } = await run(process.execPath, args, {
    env: { ...process.env, DATABASE_URL: primary.urlFor('postgres') },
    maxBuffer: 16 * 1024 * 1024,
  });
  const { rps, p50_ms, p99_ms, errors, non_2xx } = (JSON.parse(stdout) as { loads: { create: { api: Figures } } }).loads.create.api;
  const [replication] = await primary.query<{ state: string; sync_state: string }>(
    'SELECT state, sync_state FROM pg_stat_replication WHERE application_name = $1',
    [STANDBY_NAME],
  );
  return { rps, p50_ms, p99_ms, errors, non_2xx, standby: replication ? `${replication.state} ${replication.sync_state}` : 'gone' };
}

main().catch((error: unknown) => {
  process.stderr.write(`bench:standby failed: ${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(1);
});
