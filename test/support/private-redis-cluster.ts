import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { freePort } from './private-redis';

const run = promisify(execFile);
const READY_DEADLINE_MS = 20_000;
const STOP_DEADLINE_MS = 10_000;
const POLL_MS = 50;
/**
 * How long a node may be unreachable before the others call it failed and
 * its replica takes over: short, so a test sees a failover in seconds (the
 * default is 15 s).
 */
export const CLUSTER_NODE_TIMEOUT_MS = 1_000;

/**
 * A Redis Cluster of our own on loopback: three primaries and a replica each,
 * six redis-servers on free ports with their cluster files in a temporary
 * folder, nothing persisted. For specs that kill a primary and watch its
 * replica take over; the machine's Redis is never part of it.
 */
export interface PrivateRedisCluster {
  /** Every node's port, primaries and replicas. */
  readonly ports: readonly number[];
  /** REDIS_CLUSTER_NODES for the processes: every node, `127.0.0.1:port,…`. */
  readonly nodesEnv: string;
  /** The pids of the nodes still running, for a synchronous kill in an exit handler. */
  readonly pids: number[];
  /** The port of the primary that serves `key`'s slot now, as a running node sees it. */
  primaryFor(key: string): Promise<number>;
  /** SIGKILL to one node, as a crash would; resolves once it has exited. */
  kill(port: number): Promise<void>;
  /**
   * Resolves once every slot is served again and `key`'s slot by a primary
   * other than `deadPort`: the replica was promoted. Rejects after deadlineMs.
   */
  failedOver(key: string, deadPort: number, deadlineMs: number): Promise<number>;
  /** Kills every node and deletes the folder. */
  stop(): Promise<void>;
}

interface Node {
  port: number;
  child: ChildProcess;
  exited: Promise<void>;
  running: boolean;
}

export async function startPrivateRedisCluster(): Promise<PrivateRedisCluster> {
  // A free port's bus port (port + 10000) may be taken: then another draw of ports.
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce();
    } catch (error) {
      if (attempt === 3) throw error;
    }
  }
}

async function startOnce(): Promise<PrivateRedisCluster> {
  const dir = mkdtempSync(join(tmpdir(), 'payments-redis-cluster-'));
  const ports: number[] = [];
  while (ports.length < 6) {
    const port = await freePort();
    // The cluster bus listens on port + 10000: both must be free, and distinct.
    if (port < 55_000 && !ports.includes(port)) ports.push(port);
  }
  const nodes = ports.map((port) => launch(dir, port));
  const stop = async () => {
    for (const node of nodes) if (node.running) node.child.kill('SIGKILL');
    await Promise.race([Promise.all(nodes.map((node) => node.exited)), delay(STOP_DEADLINE_MS, undefined, { ref: false })]);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const deadline = Date.now() + READY_DEADLINE_MS;
    for (const node of nodes) {
      while (!(await ask(node.port, (redis) => redis.ping()).then(() => true, () => false))) {
        if (!node.running || Date.now() > deadline) throw new Error(`cluster node on ${node.port} never answered PING`);
        await delay(POLL_MS);
      }
    }
    await run('redis-cli', ['--cluster', 'create', ...ports.map((port) => `127.0.0.1:${port}`), '--cluster-replicas', '1', '--cluster-yes'], {
      timeout: READY_DEADLINE_MS,
    });
    // Every node must see the whole cluster, slots assigned and six nodes
    // known, before a client's first slot map is complete; and every replica
    // must have its primary's data: one that never synced refuses to take over.
    for (const node of nodes) {
      while (!(await isWholeAndSynced(node.port))) {
        if (Date.now() > deadline) throw new Error(`cluster node on ${node.port} never saw the cluster whole and in sync`);
        await delay(POLL_MS);
      }
    }
  } catch (error) {
    await stop();
    throw error;
  }

  const living = () => nodes.filter((node) => node.running);
  const primaryFor = async (key: string) => {
    const port = living()[0].port;
    return ask(port, async (redis) => {
      const slot = Number(await redis.cluster('KEYSLOT', key));
      const ranges = (await redis.cluster('SLOTS')) as unknown as [number, number, [string, number, string]][];
      const owner = ranges.find(([from, to]) => from <= slot && slot <= to);
      if (!owner) throw new Error(`no node serves slot ${slot}`);
      return Number(owner[2][1]);
    });
  };

  return {
    ports,
    nodesEnv: ports.map((port) => `127.0.0.1:${port}`).join(','),
    get pids() {
      return living().map((node) => node.child.pid!);
    },
    primaryFor,
    kill: async (port) => {
      const node = nodes.find((candidate) => candidate.port === port);
      if (!node?.running) throw new Error(`no running cluster node on ${port}`);
      node.child.kill('SIGKILL');
      await node.exited;
    },
    failedOver: async (key, deadPort, deadlineMs) => {
      const deadline = Date.now() + deadlineMs;
      for (;;) {
        const healthy = await Promise.all(
          living().map((node) => ask(node.port, (redis) => redis.cluster('INFO')).then((info) => /cluster_state:ok/.test(info), () => false)),
        );
        if (healthy.every(Boolean)) {
          const owner = await primaryFor(key).catch(() => deadPort);
          if (owner !== deadPort) return owner;
        }
        if (Date.now() > deadline) throw new Error(`no replica took over from ${deadPort} within ${deadlineMs} ms`);
        await delay(POLL_MS);
      }
    },
    stop,
  };
}

function launch(dir: string, port: number): Node {
  const child = spawn(
    'redis-server',
    [
      '--port', String(port),
      '--bind', '127.0.0.1',
      '--cluster-enabled', 'yes',
      '--cluster-config-file', join(dir, `nodes-${port}.conf`),
      '--cluster-node-timeout', String(CLUSTER_NODE_TIMEOUT_MS),
      '--dir', dir,
      '--save', '',
      '--appendonly', 'no',
      '--loglevel', 'warning',
    ],
    { stdio: 'ignore' },
  );
  const node: Node = { port, child, running: true, exited: Promise.resolve() };
  node.exited = new Promise((settle) =>
    child.once('exit', () => {
      node.running = false;
      settle();
    }),
  );
  return node;
}

async function isWholeAndSynced(port: number): Promise<boolean> {
  try {
    const [cluster, replication] = await ask(port, (redis) => Promise.all([redis.cluster('INFO'), redis.info('replication')]));
    const whole = /cluster_state:ok/.test(cluster) && /cluster_slots_ok:16384/.test(cluster) && /cluster_known_nodes:6/.test(cluster);
    const synced = /role:master/.test(replication)
      ? /connected_slaves:1/.test(replication)
      : /master_link_status:up/.test(replication) && /master_sync_in_progress:0/.test(replication);
    return whole && synced;
  } catch {
    return false;
  }
}

/** One command on one node, over a connection of its own that gives up at once. */
async function ask<T>(port: number, command: (redis: Redis) => Promise<T>): Promise<T> {
  const redis = new Redis({ host: '127.0.0.1', port, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    return await command(redis);
  } finally {
    redis.disconnect();
  }
}
