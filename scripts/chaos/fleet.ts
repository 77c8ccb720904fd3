import { setTimeout as delay } from 'node:timers/promises';
import type { Random } from '../lib/random';
import {
  type ApiProcess,
  type ManagedProcess,
  type WorkerProcess,
  startApiProcess,
  startWorkerProcess,
} from '../lib/processes';
import type { PrivateRedis } from '../lib/private-redis';

/**
 * The APIs and workers of a chaos run, and the faults done to them. A killed
 * API comes back on its own port, as an instance behind a fixed address would,
 * so the clients' list of addresses never changes: while it is down, their
 * requests to it fail to connect and are retried.
 */
export class Fleet {
  private constructor(
    private readonly env: Record<string, string>,
    private readonly apis: ApiProcess[],
    private readonly workers: WorkerProcess[],
  ) {}

  /** `firstApiPort`: a port chosen beforehand for the first API (the provider's events go there). */
  static async start(
    env: Record<string, string>,
    size: { apis: number; workers: number; firstApiPort?: number },
  ): Promise<Fleet> {
    const portOf = (index: number) => (index === 0 && size.firstApiPort !== undefined ? String(size.firstApiPort) : '0');
    const [apis, workers] = await Promise.all([
      Promise.all(Array.from({ length: size.apis }, (_, index) => startApiProcess({ ...env, PORT: portOf(index) }))),
      Promise.all(Array.from({ length: size.workers }, () => startWorkerProcess(env))),
    ]);
    return new Fleet(env, apis, workers);
  }

  get urls(): string[] {
    return this.apis.map((api) => api.url);
  }

  /** SIGKILLs one API, as a crash would, and starts a new one on its port after downMs. */
  async crashApi(index: number, downMs: number): Promise<void> {
    const { port } = this.apis[index];
    await this.apis[index].kill();
    await delay(downMs);
    this.apis[index] = await startApiProcess({ ...this.env, PORT: String(port) });
  }

  /** SIGKILLs one worker, most likely mid-job, and starts a new one after downMs. */
  async crashWorker(index: number, downMs: number): Promise<void> {
    await this.workers[index].kill();
    await delay(downMs);
    this.workers[index] = await startWorkerProcess(this.env);
  }

  /** SIGTERM to every process: in-flight requests and jobs finish. */
  async stop(graceMs = 10_000): Promise<void> {
    await Promise.all([...this.apis, ...this.workers].map((child: ManagedProcess) => child.stop(graceMs)));
  }

  get size(): { apis: number; workers: number } {
    return { apis: this.apis.length, workers: this.workers.length };
  }
}

interface FaultPlan {
  /** How long faults go on: the load's duration. */
  durationMs: number;
  /** A crash every this often, an API and a worker in turn. */
  crashEveryMs: number;
  /** How long a crashed process stays down. */
  downMs: number;
  /** When Redis loses every key (FLUSHALL), once. */
  flushAtMs: number;
}

interface FaultCounts {
  api_kills: number;
  worker_kills: number;
  redis_flushes: number;
}

/**
 * Runs the fault plan until its duration ends or `signal` aborts; a crash
 * already begun still restarts its process, so everything is up on return.
 */
export async function runFaults(
  fleet: Fleet,
  redis: PrivateRedis,
  plan: FaultPlan,
  random: Random,
  signal: AbortSignal,
): Promise<FaultCounts> {
  const counts: FaultCounts = { api_kills: 0, worker_kills: 0, redis_flushes: 0 };
  type Fault = { atMs: number; act: () => Promise<void> };
  const faults: Fault[] = [
    {
      atMs: plan.flushAtMs,
      act: async () => {
        await redis.flushAll();
        counts.redis_flushes++;
      },
    },
  ];
  for (let n = 1; n * plan.crashEveryMs < plan.durationMs; n++) {
    const onApi = n % 2 === 1;
    faults.push({
      atMs: n * plan.crashEveryMs,
      act: async () => {
        if (onApi) {
          await fleet.crashApi(Math.floor(random() * fleet.size.apis), plan.downMs);
          counts.api_kills++;
        } else {
          await fleet.crashWorker(Math.floor(random() * fleet.size.workers), plan.downMs);
          counts.worker_kills++;
        }
      },
    });
  }
  faults.sort((a, b) => a.atMs - b.atMs);

  const started = Date.now();
  for (const fault of faults) {
    const wait = started + fault.atMs - Date.now();
    if (wait > 0) await delay(wait, undefined, { signal }).catch(() => undefined);
    if (signal.aborted) break;
    await fault.act();
  }
  return counts;
}
