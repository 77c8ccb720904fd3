import { OnWorkerEvent, Processor, WorkerHost } from '@nestjs/bullmq';
import { Logger } from '@nestjs/common';
import type { Job } from 'bullmq';
import { errorForLog } from '../common/log-safety';
import { WORKER_RETRY_DELAY_MS } from '../common/redis-client';
import { RETENTION_QUEUE, RetentionJobName } from './retention.constants';
import { RetentionService } from './retention.service';

/**
 * Thin and safe to run twice: a prune deletes only what is past its
 * retention, and concurrent prunes skip each other's rows. One run at a time
 * per worker; a run outlasting its BullMQ lock is kept alive by the worker's
 * lock renewal, and one whose worker died is simply run again.
 */
@Processor(RETENTION_QUEUE, { concurrency: 1, runRetryDelay: WORKER_RETRY_DELAY_MS })
export class RetentionProcessor extends WorkerHost {
  private readonly logger = new Logger(RetentionProcessor.name);

  constructor(private readonly retention: RetentionService) {
    super();
  }

  /** A failed run is removed; the next one, an interval later, prunes what it left. */
  @OnWorkerEvent('failed')
  onFailed(job: Job | undefined, error: Error): void {
    this.logger.error({ msg: 'retention job failed', job: job?.name, jobId: job?.id, err: errorForLog(error) });
  }

  @OnWorkerEvent('error')
  onError(error: Error): void {
    this.logger.error({ msg: 'retention worker error', err: errorForLog(error) });
  }

  async process(job: Job): Promise<unknown> {
    switch (job.name) {
      case RetentionJobName.Prune:
        return this.retention.pruneExpired();
      default:
        throw new Error(`unknown job ${job.name}`);
    }
  }
}
