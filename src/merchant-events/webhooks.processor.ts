import { OnWorkerEvent, Processor, WorkerHost } from '@nestjs/bullmq';
import { Logger, type Type } from '@nestjs/common';
import type { Job } from 'bullmq';
import { errorForLog } from '../common/log-safety';
import { WORKER_RETRY_DELAY_MS } from '../common/redis-client';
import type { AppConfig } from '../config/app-config';
import type { DeliveryClaim } from './webhook-deliveries.repository';
import { WebhookDispatcher, claimMsFor } from './webhook-dispatcher.service';
import { WEBHOOKS_QUEUE, WebhookJobName } from './webhooks.constants';

/** Thin and safe to run twice: a send records its result only under the claim it was queued with. */
export class WebhooksProcessor extends WorkerHost {
  private readonly logger = new Logger(WebhooksProcessor.name);

  constructor(private readonly dispatcher: WebhookDispatcher) {
    super();
  }

  /** A failed job is removed; its claim expires and the next dispatch claims the delivery again. */
  @OnWorkerEvent('failed')
  onFailed(job: Job | undefined, error: Error): void {
    this.logger.error({ msg: 'webhook job failed', job: job?.name, jobId: job?.id, err: errorForLog(error) });
  }

  @OnWorkerEvent('error')
  onError(error: Error): void {
    this.logger.error({ msg: 'webhook worker error', err: errorForLog(error) });
  }

  async process(job: Job): Promise<unknown> {
    switch (job.name) {
      case WebhookJobName.Dispatch:
        return this.dispatcher.dispatch();
      case WebhookJobName.Deliver:
        return this.dispatcher.deliver(job.data as DeliveryClaim);
      default:
        throw new Error(`unknown job ${job.name}`);
    }
  }
}

/**
 * The processor for one configuration (see reconciliationProcessorFor). A
 * job's BullMQ lock lasts as long as its claim: a job whose worker died is put
 * back about when its claim expires, and whichever of the two runs first
 * sends; the other finds the claim gone or the delivery settled.
 */
export function webhooksProcessorFor(config: AppConfig): Type<WebhooksProcessor> {
  const claimMs = claimMsFor(config);
  @Processor(WEBHOOKS_QUEUE, {
    concurrency: config.webhooks.concurrency,
    lockDuration: claimMs,
    stalledInterval: claimMs,
    runRetryDelay: WORKER_RETRY_DELAY_MS,
  })
  class ConfiguredWebhooksProcessor extends WebhooksProcessor {}
  return ConfiguredWebhooksProcessor;
}
