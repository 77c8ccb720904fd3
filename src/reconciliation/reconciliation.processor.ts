import { Processor, WorkerHost } from '@nestjs/bullmq';
import type { OnApplicationBootstrap } from '@nestjs/common';
import type { Job } from 'bullmq';
import type { AppConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
import { JobName, RECONCILIATION_QUEUE, type ReconcileJobData } from './reconciliation.constants';
import { ReconciliationService } from './reconciliation.service';

/** Thin and safe to run twice: every job re-reads Postgres and acts under a lease. */
@Processor(RECONCILIATION_QUEUE)
export class ReconciliationProcessor extends WorkerHost implements OnApplicationBootstrap {
  constructor(
    private readonly reconciliation: ReconciliationService,
    @InjectConfig() private readonly config: AppConfig,
  ) {
    super();
  }

  onApplicationBootstrap(): void {
    this.worker.concurrency = this.config.reconcile.concurrency;
  }

  async process(job: Job): Promise<unknown> {
    switch (job.name) {
      case JobName.Sweep:
        return this.reconciliation.sweep();
      case JobName.Reconcile:
        return this.reconciliation.reconcile((job.data as ReconcileJobData).paymentId);
      case JobName.PruneKeys:
        return this.reconciliation.pruneExpiredKeys();
      default:
        throw new Error(`unknown job ${job.name}`);
    }
  }
}
