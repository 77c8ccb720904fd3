import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { Client } from 'pg';
import { SESSION_TIMEOUTS } from '../../src/database/data-source';
import { freePort } from './private-redis';

const READY_DEADLINE_MS = 10_000;
const STOP_DEADLINE_MS = 10_000;
const POLL_MS = 25;
/** Where Debian installs it; /usr/sbin is not on every user's PATH. */
const DEBIAN_BINARY = '/usr/sbin/pgbouncer';

/**
 * A PgBouncer of our own in transaction pooling mode, on a free loopback
 * port, in front of a Postgres server (the machine's by default): as a
 * deployment past one machine runs one between every process and the
 * database. Its configuration is the one docs/scaling.md asks for:
 *
 * - pool_mode = transaction: a server connection is a client's only for the
 *   length of one transaction, so whatever needs a session (an advisory lock,
 *   SET without LOCAL, LISTEN, a named prepared statement) cannot go through it;
 * - the session timeouts pg sends as startup parameters are ignored there
 *   (PgBouncer refuses a connection whose startup parameters it does not
 *   know) and set instead on every server connection it opens (connect_query);
 * - trust, since the server behind it trusts loopback too.
 *
 * Every database name is passed through to the server (`*`). PgBouncer
 * refuses to run as root: as root it switches to the postgres user (-u).
 */
/**
 * How long the bouncer holds a query that has no server connection, the
 * server being down included: the longest a request can wait in the pooler
 * before its 503, or before it runs once the server is back.
 */
export const QUERY_WAIT_TIMEOUT_S = 10;

export interface PrivatePgBouncer {
  readonly port: number;
  /** The bouncer's URL for `database`, e.g. postgres://postgres@127.0.0.1:PORT/payments_test. */
  urlFor(database: string): string;
  /** The bouncer's pid while it runs, for a synchronous kill in an exit handler. */
  readonly pid: number | undefined;
  /** The rows of an admin console command, such as `SHOW POOLS`. */
  admin(command: string): Promise<Record<string, string | null>[]>;
  /**
   * Points every database at the server on `serverPort` (after a failover:
   * the promoted standby). It rewrites [databases] and sends RELOAD, which
   * PgBouncer 1.18 documents as: a server connection to the old destination
   * is closed when next released (at the end of its transaction here), new
   * ones go to the new destination. Resolves after WAIT_CLOSE, once no server
   * connection to the old destination is left: from then on, no client of the
   * bouncer can reach the old server, even if it comes back.
   */
  retarget(serverPort: number): Promise<void>;
  /** Shuts it down (SIGTERM: every connection closed at once) and deletes its folder. */
  stop(): Promise<void>;
  /** Synchronous, for an exit handler, where nothing can be awaited: SIGKILL and the folder deleted. */
  destroyNow(): void;
}

export interface PgBouncerOptions {
  /** The server behind it (default: the machine's, 127.0.0.1:5432). */
  serverPort?: number;
  /** Server connections per database and user (default 10): what the clients share. */
  poolSize?: number;
}

export async function startPrivatePgBouncer(options: PgBouncerOptions = {}): Promise<PrivatePgBouncer> {
  const binary = pgbouncerBinary();
  const asRoot = process.getuid?.() === 0;
  const dir = mkdtempSync(join(tmpdir(), 'payments-pgbouncer-'));
  const port = await freePort();
  const configFile = join(dir, 'pgbouncer.ini');
  writeFileSync(join(dir, 'userlist.txt'), '"postgres" ""\n');
  writeFileSync(configFile, configuration(dir, port, options.serverPort ?? 5432, options.poolSize ?? 10));
  if (asRoot) {
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
    for (const path of [dir, join(dir, 'userlist.txt'), configFile]) chownSync(path, uid, gid);
  }

  const child: ChildProcess = spawn(binary, [...(asRoot ? ['-u', 'postgres'] : []), configFile], {
    stdio: 'ignore',
  });
  let running = true;
  const exited = new Promise<void>((settle) =>
    child.once('exit', () => {
      running = false;
      settle();
    }),
  );
  const urlFor = (database: string) => `postgres://postgres@127.0.0.1:${port}/${database}`;
  const admin = async (command: string) => {
    const client = new Client({ connectionString: urlFor('pgbouncer'), connectionTimeoutMillis: 2_000 });
    await client.connect();
    try {
      return (await client.query<Record<string, string | null>>(command)).rows;
    } finally {
      await client.end();
    }
  };
  const stop = async () => {
    if (running) {
      child.kill('SIGTERM');
      const gone = await Promise.race([exited.then(() => true), delay(STOP_DEADLINE_MS, false, { ref: false })]);
      if (!gone) throw new Error(`pgbouncer on ${port} did not exit within ${STOP_DEADLINE_MS} ms`);
    }
    rmSync(dir, { recursive: true, force: true });
  };

  const deadline = Date.now() + READY_DEADLINE_MS;
  while (!(await admin('SHOW VERSION').then(() => true, () => false))) {
    if (!running || Date.now() > deadline) {
      const log = existsSync(join(dir, 'pgbouncer.log')) ? readFileSync(join(dir, 'pgbouncer.log'), 'utf8') : '';
      await stop();
      throw new Error(`pgbouncer on ${port} did not answer within ${READY_DEADLINE_MS} ms; its log:\n${log}`);
    }
    await delay(POLL_MS);
  }
  return {
    port,
    urlFor,
    get pid() {
      return running ? child.pid : undefined;
    },
    admin,
    retarget: async (serverPort) => {
      writeFileSync(configFile, configuration(dir, port, serverPort, options.poolSize ?? 10));
      await admin('RELOAD');
      await admin('WAIT_CLOSE');
    },
    stop,
    destroyNow: () => {
      if (running) child.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The whole pgbouncer.ini, in front of the server on `serverPort`. */
function configuration(dir: string, port: number, serverPort: number, poolSize: number): string {
  const connectQuery = Object.entries(SESSION_TIMEOUTS)
    .map(([name, value]) => `SET ${name} = ${value}`)
    .join('; ');
  return [
    '[databases]',
    `* = host=127.0.0.1 port=${serverPort} connect_query='${connectQuery}'`,
    '[pgbouncer]',
    'listen_addr = 127.0.0.1',
    `listen_port = ${port}`,
    'unix_socket_dir =',
    'auth_type = trust',
    `auth_file = ${join(dir, 'userlist.txt')}`,
    'admin_users = postgres',
    'pool_mode = transaction',
    `default_pool_size = ${poolSize}`,
    'max_client_conn = 2000',
    `ignore_startup_parameters = ${Object.keys(SESSION_TIMEOUTS).join(',')}`,
    // A query waits this long for a server connection, then its client gets
    // an error (08P01, answered 503) rather than queueing behind a stuck pool.
    `query_wait_timeout = ${QUERY_WAIT_TIMEOUT_S}`,
    // After a failed connection to the server, try again after a second, not 15.
    'server_login_retry = 1',
    `logfile = ${join(dir, 'pgbouncer.log')}`,
    'log_connections = 0',
    'log_disconnections = 0',
    '',
  ].join('\n');
}

function pgbouncerBinary(): string {
  if (existsSync(DEBIAN_BINARY)) return DEBIAN_BINARY;
  try {
    return execFileSync('sh', ['-c', 'command -v pgbouncer'], { encoding: 'utf8' }).trim();
  } catch {
    throw new Error(`pgbouncer not found (${DEBIAN_BINARY}, or on the PATH): scripts/install-test-prerequisites installs it`);
  }
}
