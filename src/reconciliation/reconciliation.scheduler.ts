import { InjectQueue } from '@nestjs/bullmq';
import { Injectable, Logger, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import type { Queue } from 'bullmq';
import { KeptJobSchedulers } from '../common/kept-job-schedulers';
import type { AppConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import { JobName, RECONCILIATION_QUEUE } from './reconciliation.constants';

/** The sweep and the key prune, each once per interval, kept in Redis whatever Redis loses. */
@Injectable()
export class ReconciliationScheduler implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly schedulers: KeptJobSchedulers;

  constructor(@InjectQueue(RECONCILIATION_QUEUE) queue: Queue, @InjectConfig() config: AppConfig) {
    this.schedulers = new KeptJobSchedulers(
      queue,
      [
        { id: 'reconcile-sweep', everyMs: config.reconcile.intervalMs, jobName: JobName.Sweep },
        { id: 'prune-idempotency-keys', everyMs: config.keyPrune.intervalMs, jobName: JobName.PruneKeys },
      ],
      config.reconcile.intervalMs,
      new Logger(ReconciliationScheduler.name),
    );
  }

  onApplicationBootstrap(): Promise<void> {
    return this.schedulers.start();
  }

  onApplicationShutdown(): void {
    this.schedulers.stop();
  }
}
