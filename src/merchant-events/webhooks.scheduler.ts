import { InjectQueue } from '@nestjs/bullmq';
import { Injectable, Logger, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import type { Queue } from 'bullmq';
import { KeptJobSchedulers } from '../common/kept-job-schedulers';
import type { AppConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import { WEBHOOKS_QUEUE, WebhookJobName } from './webhooks.constants';

/** One webhook dispatch per interval, kept in Redis whatever Redis loses. */
@Injectable()
export class WebhooksScheduler implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly schedulers: KeptJobSchedulers;

  constructor(@InjectQueue(WEBHOOKS_QUEUE) queue: Queue, @InjectConfig() config: AppConfig) {
    const everyMs = config.webhooks.dispatchIntervalMs;
    this.schedulers = new KeptJobSchedulers(
      queue,
      [{ id: 'webhook-dispatch', everyMs, jobName: WebhookJobName.Dispatch }],
      // Checked at most once a second: a lost dispatch delays deliveries, it does not lose them.
      Math.max(everyMs, 1_000),
      new Logger(WebhooksScheduler.name),
    );
  }

  onApplicationBootstrap(): Promise<void> {
    return this.schedulers.start();
  }

  onApplicationShutdown(): void {
    this.schedulers.stop();
  }
}
