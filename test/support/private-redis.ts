import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { type Server, createServer } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import { Redis } from 'ioredis';

const READY_DEADLINE_MS = 10_000;
const STOP_DEADLINE_MS = 10_000;
const POLL_MS = 25;

/**
 * A redis-server of our own on a free loopback port, for tests and runs that
 * stop, restart or flush Redis: the machine's Redis serves other people.
 * Nothing is persisted (no RDB, no AOF), so a restart starts empty, as a
 * Redis that lost its data would.
 */
export interface PrivateRedis {
  readonly port: number;
  readonly url: string;
  /** Whether the server process is running now. */
  readonly running: boolean;
  /** The server's pid while it runs, for a synchronous kill in an exit handler. */
  readonly pid: number | undefined;
  /** Starts the server (again) on the same port; resolves once it answers PING. */
  start(): Promise<void>;
  /** SIGKILL, as a crash would; resolves once the process is gone and the port refuses connections. */
  kill(): Promise<void>;
  /** FLUSHALL: every key of every database, job schedulers included. */
  flushAll(): Promise<void>;
}

export async function startPrivateRedis(): Promise<PrivateRedis> {
  const port = await freePort();
  const url = `redis://127.0.0.1:${port}`;
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();

  const start = async () => {
    if (child) throw new Error(`private redis on ${port} is already running`);
    const spawned = spawn(
      'redis-server',
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--loglevel', 'warning'],
      { stdio: 'ignore' },
    );
    child = spawned;
    exited = new Promise((settle) =>
      spawned.once('exit', () => {
        if (child === spawned) child = undefined;
        settle();
      }),
    );
    const deadline = Date.now() + READY_DEADLINE_MS;
    while (!(await answersPing(url))) {
      if (child !== spawned) throw new Error(`redis-server on ${port} exited before answering PING`);
      if (Date.now() > deadline) throw new Error(`redis-server on ${port} did not answer PING within ${READY_DEADLINE_MS} ms`);
      await delay(POLL_MS);
    }
  };

  const kill = async () => {
    if (!child) return;
    child.kill('SIGKILL');
    const gone = await Promise.race([exited.then(() => true), delay(STOP_DEADLINE_MS, false, { ref: false })]);
    if (!gone) throw new Error(`redis-server on ${port} did not exit within ${STOP_DEADLINE_MS} ms`);
  };

  await start();
  return {
    port,
    url,
    get running() {
      return child !== undefined;
    },
    get pid() {
      return child?.pid;
    },
    start,
    kill,
    flushAll: async () => {
      const client = new Redis(url, { maxRetriesPerRequest: 1, lazyConnect: true });
      try {
        await client.connect();
        await client.flushall();
      } finally {
        client.disconnect();
      }
    },
  };
}

async function answersPing(url: string): Promise<boolean> {
  const client = new Redis(url, { maxRetriesPerRequest: 0, retryStrategy: () => null, lazyConnect: true });
  client.on('error', () => undefined);
  try {
    await client.connect();
    return (await client.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    client.disconnect();
  }
}

/**
 * A loopback port held by a listening socket until `release`, for a server
 * of this process that must be told its port before it can listen (a
 * provider given the API's URL first): while held, no other socket can take
 * it, an outgoing connection's ephemeral port included. Release it right
 * before listening on it; releasing again does nothing.
 */
export async function reservePort(): Promise<{ port: number; release: () => Promise<void> }> {
  const server = await listeningOn(0);
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  const closed = new Promise<void>((done) => server.once('close', () => done()));
  return {
    port,
    release: () => {
      if (server.listening) server.close();
      return closed;
    },
  };
}

/** The lowest port freePort picks: above those servers are usually configured on (5432, 6379, 8080, …). */
const UNHANDED_PORTS_FROM = 20_000;

/**
 * A loopback port that is free now, for a server another process will start
 * on it later. It is picked at random below the kernel's ephemeral range
 * (net.ipv4.ip_local_port_range), from which the kernel hands out ports by
 * itself: an outgoing connection or a listen on port 0 never takes one of
 * these in the meantime, as either could take a port the kernel had just
 * handed out and been given back. Where the range leaves no room below it,
 * falls back to such a port (see reservePort).
 */
export async function freePort(): Promise<number> {
  const below = ephemeralPortsFrom();
  for (let attempt = 0; below - UNHANDED_PORTS_FROM >= 1_000 && attempt < 20; attempt++) {
    const port = UNHANDED_PORTS_FROM + Math.floor(Math.random() * (below - UNHANDED_PORTS_FROM));
    if (await canListen(port)) return port;
  }
  const { port, release } = await reservePort();
  await release();
  return port;
}

function ephemeralPortsFrom(): number {
  try {
    return Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
  } catch {
    return 0;
  }
}

async function canListen(port: number): Promise<boolean> {
  const server = await listeningOn(port).catch(() => undefined);
  if (server) await new Promise<void>((closed) => server.close(() => closed()));
  return server !== undefined;
}

/** A server listening on loopback `port` (0: one the kernel picks); rejects when the port is taken. */
async function listeningOn(port: number): Promise<Server> {
  const server = createServer();
  await new Promise<void>((listening, fail) => {
    server.once('error', fail);
    server.listen(port, '127.0.0.1', () => listening());
  });
  return server;
}
