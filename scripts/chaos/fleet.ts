import { setTimeout as delay } from 'node:timers/promises';
import type { Random } from '../../test/support/random';
import {
  type ApiProcess,
  type LaunchOptions,
  type ManagedProcess,
  type WorkerProcess,
  isHealthy,
  startApiProcess,
  startWorkerProcess,
} from '../../test/support/processes';
import type { PrivatePostgres, StopMode } from '../../test/support/private-postgres';
import type { PrivateRedis } from '../../test/support/private-redis';
import type { Outage } from './verdict';

const READY_POLL_MS = 50;
/** How much of the output of a process that exited on its own the log quotes. */
const TAIL_LINES = 80;

/**
 * The APIs and workers of a chaos run, and the faults done to them. A killed
 * API comes back on its own port, as an instance behind a fixed address would,
 * so the clients' list of addresses never changes: while it is down, their
 * requests to it fail to connect and are retried. A process that exits
 * without being killed is counted and logged, not restarted: no fault may
 * bring one down.
 */
export class Fleet {
  /** Processes the fleet itself is ending: their exits are expected. */
  private readonly ending = new WeakSet<ManagedProcess>();
  private exitsUnasked = 0;

  private constructor(
    private readonly env: Record<string, string>,
    private readonly launch: LaunchOptions,
    private readonly apis: ApiProcess[],
    private readonly workers: WorkerProcess[],
    private readonly log: (line: string) => void,
  ) {
    for (const child of [...apis, ...workers]) this.watch(child);
  }

  /**
   * `firstApiPort`: a port chosen beforehand for the first API (the provider's
   * events go there). `launch`: how every process of the fleet is started, its
   * replacements included.
   */
  static async start(
    env: Record<string, string>,
    size: { apis: number; workers: number; firstApiPort?: number },
    launch: LaunchOptions,
    log: (line: string) => void,
  ): Promise<Fleet> {
    const portOf = (index: number) => (index === 0 && size.firstApiPort !== undefined ? String(size.firstApiPort) : '0');
    const [apis, workers] = await Promise.all([
      Promise.all(Array.from({ length: size.apis }, (_, index) => startApiProcess({ ...env, PORT: portOf(index) }, launch))),
      Promise.all(Array.from({ length: size.workers }, () => startWorkerProcess(env, launch))),
    ]);
    return new Fleet(env, launch, apis, workers, log);
  }

  get urls(): string[] {
    return this.apis.map((api) => api.url);
  }

  /** APIs and workers that exited without the fleet ending them. */
  get unexpectedExits(): number {
    return this.exitsUnasked;
  }

  /** SIGKILLs one API, as a crash would, and starts a new one on its port after downMs. */
  async crashApi(index: number, downMs: number): Promise<void> {
    const { port } = this.apis[index];
    await this.end(this.apis[index]).kill();
    await delay(downMs);
    this.apis[index] = this.watch(await startApiProcess({ ...this.env, PORT: String(port) }, this.launch));
  }

  /** SIGKILLs one worker, most likely mid-job, and starts a new one after downMs. */
  async crashWorker(index: number, downMs: number): Promise<void> {
    await this.end(this.workers[index]).kill();
    await delay(downMs);
    this.workers[index] = this.watch(await startWorkerProcess(this.env, this.launch));
  }

  /**
   * Polls every API's GET /health/ready until all answer 200; the milliseconds
   * that took, or null when they did not within deadlineMs.
   */
  async untilReady(deadlineMs: number): Promise<number | null> {
    const started = Date.now();
    const pending = new Set(this.apis.map((api) => api.url));
    while (pending.size > 0) {
      if (Date.now() - started > deadlineMs) return null;
      for (const url of [...pending]) if (await isHealthy(`${url}/health/ready`)) pending.delete(url);
      if (pending.size > 0) await delay(READY_POLL_MS);
    }
    return Date.now() - started;
  }

  /** SIGTERM to every process: in-flight requests and jobs finish. */
  async stop(graceMs = 10_000): Promise<void> {
    await Promise.all([...this.apis, ...this.workers].map((child: ManagedProcess) => this.end(child).stop(graceMs)));
  }

  private end<T extends ManagedProcess>(child: T): T {
    this.ending.add(child);
    return child;
  }

  private watch<T extends ManagedProcess>(child: T): T {
    void child.exited.then((exit) => {
      if (this.ending.has(child)) return;
      this.exitsUnasked++;
      const tail = child.output().slice(-TAIL_LINES).join('\n');
      this.log(`${child.name} (pid ${child.pid}) exited on its own (${JSON.stringify(exit)}); its last lines:\n${tail}`);
    });
    return child;
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
  /** Postgres restarts, evenly over the duration, between crashes: a fast stop and an immediate one in turn. */
  postgres?: { server: PrivatePostgres; restarts: number; downMs: number; recoveryDeadlineMs: number };
}

interface FaultCounts {
  api_kills: number;
  worker_kills: number;
  redis_flushes: number;
  postgres_restarts_fast: number;
  postgres_restarts_immediate: number;
}

/**
 * Runs the fault plan until its duration ends or `signal` aborts; a fault
 * already begun still ends (a crashed process restarted, Postgres started),
 * so everything is up on return. One fault at a time: an API never restarts
 * while Postgres is down, and an outage's recovery is the pool's alone.
 */
export async function runFaults(
  fleet: Fleet,
  redis: PrivateRedis,
  plan: FaultPlan,
  random: Random,
  signal: AbortSignal,
  log: (line: string) => void,
): Promise<{ counts: FaultCounts; outages: Outage[] }> {
  const counts: FaultCounts = {
    api_kills: 0,
    worker_kills: 0,
    redis_flushes: 0,
    postgres_restarts_fast: 0,
    postgres_restarts_immediate: 0,
  };
  const outages: Outage[] = [];
  /**
   * `act` resolves with what happened, for the progress log. `store`: a fault
   * of Redis or Postgres, of which a run has few; when faults fall behind (a
   * restart is slow on a busy machine), a due one goes before due crashes.
   */
  type Fault = { atMs: number; store: boolean; act: () => Promise<string> };
  const faults: Fault[] = [
    {
      atMs: plan.flushAtMs,
      store: true,
      act: async () => {
        await redis.flushAll();
        counts.redis_flushes++;
        return 'redis flushed';
      },
    },
  ];
  for (let n = 1; n * plan.crashEveryMs < plan.durationMs; n++) {
    const onApi = n % 2 === 1;
    faults.push({
      atMs: n * plan.crashEveryMs,
      store: false,
      act: async () => {
        if (onApi) {
          const index = Math.floor(random() * fleet.size.apis);
          await fleet.crashApi(index, plan.downMs);
          counts.api_kills++;
          return `api ${index} killed and restarted`;
        }
        const index = Math.floor(random() * fleet.size.workers);
        await fleet.crashWorker(index, plan.downMs);
        counts.worker_kills++;
        return `worker ${index} killed and restarted`;
      },
    });
  }
  const postgres = plan.postgres;
  for (let n = 1; postgres && n <= postgres.restarts; n++) {
    const mode: StopMode = n % 2 === 1 ? 'fast' : 'immediate';
    faults.push({
      atMs: (n * plan.durationMs) / (postgres.restarts + 1) + plan.crashEveryMs / 2,
      store: true,
      act: async () => {
        const fromMs = Date.now();
        await postgres.server.stop(mode);
        await delay(postgres.downMs);
        await postgres.server.start();
        const toMs = Date.now();
        const recoveryMs = await fleet.untilReady(postgres.recoveryDeadlineMs);
        outages.push({ fromMs, toMs, recoveryMs });
        counts[mode === 'fast' ? 'postgres_restarts_fast' : 'postgres_restarts_immediate']++;
        const recovery = recoveryMs === null ? 'APIs not ready again' : `APIs ready ${recoveryMs} ms later`;
        return `postgres stopped (${mode}) and started: down ${toMs - fromMs} ms, ${recovery}`;
      },
    });
  }
  faults.sort((a, b) => a.atMs - b.atMs);

  const started = Date.now();
  while (faults.length > 0 && !signal.aborted) {
    const wait = started + faults[0].atMs - Date.now();
    if (wait > 0) {
      await delay(wait, undefined, { signal }).catch(() => undefined);
      continue;
    }
    const elapsed = Date.now() - started;
    const fault = faults.find((due) => due.store && due.atMs <= elapsed) ?? faults[0];
    faults.splice(faults.indexOf(fault), 1);
    const begun = Date.now();
    const what = await fault.act();
    log(`at ${((begun - started) / 1_000).toFixed(1)} s (planned ${(fault.atMs / 1_000).toFixed(1)} s): ${what}`);
  }
  return { counts, outages };
}
