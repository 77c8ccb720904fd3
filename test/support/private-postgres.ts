import { execFile } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Client } from 'pg';
import { freePort } from './private-redis';

const run = promisify(execFile);
const PG_ROOT = '/usr/lib/postgresql';
const CTL_TIMEOUT_S = 30;
const POLL_MS = 20;

/**
 * A Postgres cluster of our own (initdb in a temporary folder, a free loopback
 * port), for tests and runs that stop and restart the database: the machine's
 * server is shared with other people and with CI. Postgres refuses to run as
 * root, so as root every command runs as the postgres user (runuser), in a
 * folder that user owns; as anyone else, as that user.
 */
export interface PrivatePostgres {
  readonly port: number;
  /** The server's URL for `database`, e.g. postgres://postgres@127.0.0.1:PORT/payments_test. */
  urlFor(database: string): string;
  /** The rows of one statement, on the postgres database. */
  query<T = Record<string, unknown>>(sql: string, parameters?: unknown[]): Promise<T[]>;
  /** ALTER SYSTEM SET each setting, then a configuration reload: for settings a reload applies. */
  configure(settings: Record<string, string>): Promise<void>;
  /**
   * pg_ctl stop; new connections are refused until start(). `fast` (the
   * default) terminates open connections (57P01) and shuts down cleanly;
   * `immediate` kills every backend at once (57P02 at best, a cut socket at
   * worst), as a crash would, and the next start runs crash recovery.
   */
  stop(mode?: StopMode): Promise<void>;
  /** pg_ctl start; resolves once the server accepts connections. */
  start(): Promise<void>;
  /** Stops the server and deletes the cluster. */
  destroy(): Promise<void>;
  /**
   * Synchronous, for an exit handler, where nothing can be awaited: SIGQUIT
   * to the postmaster (an immediate shutdown) and the folder deleted.
   */
  destroyNow(): void;
}

/** A hot standby streaming from a private primary. */
export interface PrivateStandby extends PrivatePostgres {
  /** pg_ctl promote: resolves once the standby has left recovery and takes writes. */
  promote(): Promise<void>;
}

export type StopMode = 'fast' | 'immediate';

export async function startPrivatePostgres(): Promise<PrivatePostgres> {
  const folder = await clusterFolder();
  await folder.pg('initdb', ['-D', folder.data, '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8']);
  return serve(folder, []);
}

/**
 * A copy of `primary` made with pg_basebackup -R (standby.signal, and
 * primary_conninfo pointing at the primary), started as a hot standby that
 * streams the primary's WAL. It connects under `name` (its cluster_name,
 * which a standby sends as its application_name): the name the primary's
 * synchronous_standby_names lists.
 */
export async function startPrivateStandby(primary: PrivatePostgres, name: string): Promise<PrivateStandby> {
  const folder = await clusterFolder();
  const source = ['-h', '127.0.0.1', '-p', String(primary.port), '-U', 'postgres'];
  // A fast checkpoint starts the copy at once rather than after a spread one.
  await folder.pg('pg_basebackup', [...source, '-D', folder.data, '-R', '--checkpoint=fast', '--no-sync']);
  const standby = await serve(folder, [`-c cluster_name=${name}`]);
  return {
    ...standby,
    promote: async () => {
      await folder.pg('pg_ctl', ['-D', folder.data, '-w', '-t', String(CTL_TIMEOUT_S), 'promote']);
    },
  };
}

/** A temporary folder the postgres user owns, for one cluster (in `data`), its socket and its log. */
interface ClusterFolder {
  dir: string;
  data: string;
  /** Runs one of the server's tools, as the postgres user. */
  pg(tool: string, args: string[]): Promise<unknown>;
}

async function clusterFolder(): Promise<ClusterFolder> {
  const bin = newestPostgresBin();
  const asRoot = process.getuid?.() === 0;
  const dir = mkdtempSync(join(tmpdir(), 'payments-pg-'));
  if (asRoot) {
    const uid = Number((await run('id', ['-u', 'postgres'])).stdout.trim());
    const gid = Number((await run('id', ['-g', 'postgres'])).stdout.trim());
    chownSync(dir, uid, gid);
  }
  const data = join(dir, 'data');
  const pg = (tool: string, args: string[]) =>
    asRoot
      ? run('runuser', ['-u', 'postgres', '--', join(bin, tool), ...args], { timeout: CTL_TIMEOUT_S * 1_000 })
      : run(join(bin, tool), args, { timeout: CTL_TIMEOUT_S * 1_000 });
  return { dir, data, pg };
}

/** Starts the cluster in the folder on a free loopback port, with `settings` (`-c name=value`) on top of ours. */
async function serve({ dir, data, pg }: ClusterFolder, settings: string[]): Promise<PrivatePostgres> {
  const port = await freePort();
  // The machine never crashes under a test, only the server: writes need
  // not reach the disk (fsync, full pages), but a commit must be in the WAL
  // before it is acknowledged, as on a production server. With
  // synchronous_commit=off an immediate stop loses the last acknowledged
  // commits, and the chaos run's audit rightly reports them.
  const options = [
    `-c port=${port}`,
    `-c listen_addresses=127.0.0.1`,
    `-c unix_socket_directories=${dir}`,
    '-c fsync=off',
    '-c full_page_writes=off',
    ...settings,
  ].join(' ');
  const start = async () => {
    await pg('pg_ctl', ['-D', data, '-l', join(dir, 'server.log'), '-o', options, '-w', '-t', String(CTL_TIMEOUT_S), 'start']);
  };
  const stop = async (mode: StopMode = 'fast') => {
    await pg('pg_ctl', ['-D', data, '-m', mode, '-w', '-t', String(CTL_TIMEOUT_S), 'stop']);
  };
  const urlFor = (database: string) => `postgres://postgres@127.0.0.1:${port}/${database}`;
  const query = async <T>(sql: string, parameters: unknown[] = []): Promise<T[]> => {
    const client = new Client({ connectionString: urlFor('postgres') });
    await client.connect();
    try {
      return (await client.query(sql, parameters)).rows as T[];
    } finally {
      await client.end();
    }
  };
  await start();

  return {
    port,
    urlFor,
    query,
    configure: async (values) => {
      // ALTER SYSTEM takes no parameters; the names and values are ours, never a caller's input.
      for (const [name, value] of Object.entries(values)) await query(`ALTER SYSTEM SET ${name} = '${value}'`);
      await query('SELECT pg_reload_conf()');
    },
    stop,
    start,
    destroy: async () => {
      if (existsSync(join(data, 'postmaster.pid'))) await stop();
      rmSync(dir, { recursive: true, force: true });
    },
    destroyNow: () => {
      const pidFile = join(data, 'postmaster.pid');
      try {
        // Its first line is the postmaster's pid; the file outlives a postmaster that was SIGKILLed.
        const pid = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
        process.kill(pid, 'SIGQUIT');
        // A postmaster still shutting down writes into the folder as it is
        // deleted, which leaves the folder behind: wait (synchronously, with
        // Atomics.wait as the sleep) until signal 0 finds no such process.
        const deadline = Date.now() + CTL_TIMEOUT_S * 1_000;
        while (Date.now() < deadline) {
          process.kill(pid, 0);
          Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, POLL_MS);
        }
      } catch {
        // No file, or no such process (any more): nothing runs.
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function newestPostgresBin(): string {
  const versions = existsSync(PG_ROOT)
    ? readdirSync(PG_ROOT)
        .filter((name) => /^\d+$/.test(name) && existsSync(join(PG_ROOT, name, 'bin', 'initdb')))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (versions.length === 0) throw new Error(`no Postgres server binaries under ${PG_ROOT}`);
  return join(PG_ROOT, versions[0], 'bin');
}
