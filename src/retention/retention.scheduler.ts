import { InjectQueue } from '@nestjs/bullmq';
import { Injectable, Logger, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import type { Queue } from 'bullmq';
import { KeptJobSchedulers } from '../common/kept-job-schedulers';
import type { AppConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import { RETENTION_QUEUE, RetentionJobName } from './retention.constants';

/** One retention prune per interval, kept in Redis whatever Redis loses. */
@Injectable()
export class RetentionScheduler implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly schedulers: KeptJobSchedulers;

  constructor(@InjectQueue(RETENTION_QUEUE) queue: Queue, @InjectConfig() config: AppConfig) {
    const everyMs = config.retention.intervalMs;
    this.schedulers = new KeptJobSchedulers(
      queue,
      [{ id: 'retention-prune', everyMs, jobName: RetentionJobName.Prune }],
      // Checked at most once a second: a lost schedule only delays a prune.
      Math.max(everyMs, 1_000),
      new Logger(RetentionScheduler.name),
    );
  }

  onApplicationBootstrap(): Promise<void> {
    return this.schedulers.start();
  }

  onApplicationShutdown(): void {
    this.schedulers.stop();
  }
}
