import { InjectQueue } from '@nestjs/bullmq';
import { Injectable, Logger, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import type { Queue } from 'bullmq';
import { errorForLog } from '../common/log-safety';
import type { AppConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import { JobName, RECONCILIATION_QUEUE } from './reconciliation.constants';

const SWEEP_SCHEDULER = 'reconcile-sweep';
const PRUNE_SCHEDULER = 'prune-idempotency-keys';

/**
 * Upserts the two job schedulers. Every worker does this at start; the
 * scheduler ids are fixed, so however many workers run there is one sweep
 * and one prune per interval, each taken by one worker.
 *
 * Redis can lose every key (FLUSHALL, a restart without persistence), the
 * schedulers with them, and nothing but an upsert brings a scheduler back:
 * so each worker also checks once per sweep interval that both still exist
 * and re-creates them if not. Checking first, rather than upserting blindly,
 * leaves a live schedule's timing alone.
 */
@Injectable()
export class ReconciliationScheduler implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger(ReconciliationScheduler.name);
  private watch?: NodeJS.Timeout;
  private checking = false;

  constructor(
    @InjectQueue(RECONCILIATION_QUEUE) private readonly queue: Queue,
    @InjectConfig() private readonly config: AppConfig,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    await this.upsertSchedulers();
    this.watch = setInterval(() => void this.restoreIfLost(), this.config.reconcile.intervalMs).unref();
  }

  onApplicationShutdown(): void {
    clearInterval(this.watch);
  }

  private async upsertSchedulers(): Promise<void> {
    const done = { removeOnComplete: true, removeOnFail: 100 };
    await this.queue.upsertJobScheduler(
      SWEEP_SCHEDULER,
      { every: this.config.reconcile.intervalMs },
      { name: JobName.Sweep, opts: done },
    );
    await this.queue.upsertJobScheduler(
      PRUNE_SCHEDULER,
      { every: this.config.keyPrune.intervalMs },
      { name: JobName.PruneKeys, opts: done },
    );
  }

  private async restoreIfLost(): Promise<void> {
    // While Redis is away a check can outlast the interval; one at a time is enough.
    if (this.checking) return;
    this.checking = true;
    try {
      const [sweep, prune] = await Promise.all([
        this.queue.getJobScheduler(SWEEP_SCHEDULER),
        this.queue.getJobScheduler(PRUNE_SCHEDULER),
      ]);
      if (sweep && prune) return;
      await this.upsertSchedulers();
      this.logger.warn({ msg: 'job schedulers were missing from Redis: re-created' });
    } catch (error) {
      this.logger.warn({ msg: 'could not check the job schedulers; will retry', err: errorForLog(error) });
    } finally {
      this.checking = false;
    }
  }
}
