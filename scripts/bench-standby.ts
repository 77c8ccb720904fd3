import { execFile } from 'node:child_process';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Client } from 'pg';
import { type Figures, round } from './bench/measure';
import type { PrivatePostgres } from '../test/support/private-postgres';
import { STANDBY_NAME, startReplicatedPostgres } from '../test/support/private-standby';

/**
 * `npm run bench:standby -- [bench options]`: what waiting for a synchronous
 * standby costs. One private primary streams to a hot standby
 * (test/support/private-standby.ts); the bench's create scenario runs against
 * the primary twice, first with synchronous_commit = on (each commit waits
 * until the standby has flushed it), then with synchronous_commit = local
 * (the same standby still streaming, no commit waiting for it). The options
 * (--seconds, --warmup, --connections) go to both runs. Each mode also times
 * a commit alone: one connection, one-row INSERTs one after another, each its
 * own commit, which shows the wait where a loaded machine's noise hides it
 * in the creates. One JSON line.
 */
const run = promisify(execFile);
const BENCH = join(__dirname, 'bench.js');
const DATABASE = 'payments_bench_standby';
const PROBE_COMMITS = 1_000;

type Mode = 'on' | 'local';

interface ModeFigures extends Pick<Figures, 'rps' | 'p50_ms' | 'p99_ms' | 'errors' | 'non_2xx'> {
  /** Mean time of one commit alone. */
  commit_ms: number;
  /** The standby as the primary sees it after the run (`streaming sync`): it streamed, as the synchronous standby, throughout. */
  standby: string;
}

async function main(): Promise<void> {
  const loadAtStart = loadavg().map((value) => round(value));
  const postgres = await startReplicatedPostgres();
  // pg_ctl starts the servers detached: on Ctrl-C they would outlive this process.
  process.once('exit', () => postgres.destroyNow());
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => process.exit(130));
  try {
    await postgres.primary.query('CREATE TABLE commit_probe (n int)');
    const on = await measure(postgres.primary, 'on');
    const local = await measure(postgres.primary, 'local');
    const report = {
      synchronous_commit_on: on,
      synchronous_commit_local: local,
      rps_on_over_local: round(on.rps / local.rps),
      commit_ms_on_minus_local: round(on.commit_ms - local.commit_ms, 3),
      load_average_at_start: loadAtStart,
      load_average_at_end: loadavg().map((value) => round(value)),
    };
    process.stdout.write(`${JSON.stringify(report)}\n`);
  } finally {
    await postgres.destroy();
  }
}

/** The bench's create scenario against the primary, then a commit alone, its commits under `synchronousCommit`. */
async function measure(primary: PrivatePostgres, synchronousCommit: Mode): Promise<ModeFigures> {
  await primary.configure({ synchronous_commit: synchronousCommit });
  const args = [BENCH, '--scenarios', 'create', '--database', DATABASE, '--json', ...process.argv.slice(2)];
  const { stdout } = await run(process.execPath, args, {
    env: { ...process.env, DATABASE_URL: primary.urlFor('postgres') },
    maxBuffer: 16 * 1024 * 1024,
  });
  const { rps, p50_ms, p99_ms, errors, non_2xx } = (JSON.parse(stdout) as { loads: { create: { api: Figures } } }).loads.create.api;
  const commitMs = await commitAlone(primary);
  const [replication] = await primary.query<{ state: string; sync_state: string }>(
    'SELECT state, sync_state FROM pg_stat_replication WHERE application_name = $1',
    [STANDBY_NAME],
  );
  const standby = replication ? `${replication.state} ${replication.sync_state}` : 'gone';
  return { rps, p50_ms, p99_ms, errors, non_2xx, commit_ms: commitMs, standby };
}

/** The mean time of PROBE_COMMITS one-row INSERTs, each its own transaction, on one connection. */
async function commitAlone(primary: PrivatePostgres): Promise<number> {
  const client = new Client({ connectionString: primary.urlFor('postgres') });
  await client.connect();
  try {
    const started = performance.now();
    for (let n = 0; n < PROBE_COMMITS; n++) await client.query('INSERT INTO commit_probe VALUES ($1)', [n]);
    return round((performance.now() - started) / PROBE_COMMITS, 3);
  } finally {
    await client.end();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`bench:standby failed: ${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(1);
});
