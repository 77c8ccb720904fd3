import { InjectQueue } from '@nestjs/bullmq';
import { Injectable, type OnApplicationBootstrap } from '@nestjs/common';
import type { Queue } from 'bullmq';
import type { AppConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import { JobName, RECONCILIATION_QUEUE } from './reconciliation.constants';

/**
 * Upserts the two job schedulers. Every worker does this at start; the
 * scheduler ids are fixed, so however many workers run there is one sweep
 * and one prune per interval, each taken by one worker.
 */
@Injectable()
export class ReconciliationScheduler implements OnApplicationBootstrap {
  constructor(
    @InjectQueue(RECONCILIATION_QUEUE) private readonly queue: Queue,
    @InjectConfig() private readonly config: AppConfig,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    const done = { removeOnComplete: true, removeOnFail: 100 };
    await this.queue.upsertJobScheduler(
      'reconcile-sweep',
      { every: this.config.reconcile.intervalMs },
      { name: JobName.Sweep, opts: done },
    );
    await this.queue.upsertJobScheduler(
      'prune-idempotency-keys',
      { every: this.config.keyPrune.intervalMs },
      { name: JobName.PruneKeys, opts: done },
    );
  }
}
