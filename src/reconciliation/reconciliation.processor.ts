import { OnWorkerEvent, Processor, WorkerHost } from '@nestjs/bullmq';
import { Logger, type OnModuleDestroy, type Type } from '@nestjs/common';
import type { Job } from 'bullmq';
import { errorForLog } from '../common/log-safety';
import { WORKER_RETRY_DELAY_MS } from '../common/redis-client';
import type { AppConfig } from '../config/app-config';
import { PAYMENT_SIDE, PROVIDER_SIDES } from '../operations/provider-side';
import { reconcileLimiter } from './reconcile-limiter';
import { JobName, RECONCILIATION_QUEUE, type ReconcileJobData } from './reconciliation.constants';
import { ReconciliationService } from './reconciliation.service';

/** Thin and safe to run twice: every job re-reads Postgres and acts under a lease. */
export class ReconciliationProcessor extends WorkerHost implements OnModuleDestroy {
  private readonly logger = new Logger(ReconciliationProcessor.name);
  /** Aborted when the worker is stopping, before BullMQ's close waits for the running jobs. */
  private readonly stopping = new AbortController();

  constructor(private readonly reconciliation: ReconciliationService) {
    super();
  }

  /** A failed job is removed; the next sweep queues the payment again, so this is a log line, not a loss. */
  @OnWorkerEvent('failed')
  onFailed(job: Job | undefined, error: Error): void {
    this.logger.error({ msg: 'reconciliation job failed', job: job?.name, jobId: job?.id, err: errorForLog(error) });
  }

  /** Redis trouble (a lost connection, keys gone after a flush): logged as JSON, not printed raw. */
  @OnWorkerEvent('error')
  onError(error: Error): void {
    this.logger.error({ msg: 'reconciliation worker error', err: errorForLog(error) });
  }

  onModuleDestroy(): void {
    this.stopping.abort();
  }

  async process(job: Job): Promise<unknown> {
    switch (job.name) {
      case JobName.Sweep:
        return this.reconciliation.sweep(this.stopping.signal);
      case JobName.Reconcile: {
        const data = job.data as ReconcileJobData;
        if ('ids' in data) return this.reconciliation.reconcileBatch(PROVIDER_SIDES[data.operation], data.clientId, data.ids);
        return 'paymentIds' in data
          ? this.reconciliation.reconcileBatch(PAYMENT_SIDE, data.clientId, data.paymentIds)
          : this.reconciliation.reconcile(PAYMENT_SIDE, { clientId: data.clientId, id: data.paymentId });
      }
      case JobName.PruneKeys:
        return this.reconciliation.pruneExpiredKeys();
      default:
        throw new Error(`unknown job ${job.name}`);
    }
  }
}

/**
 * The processor for one configuration: BullMQ's worker options are arguments
 * of @Processor, which a class declared once cannot take from the
 * configuration, hence a subclass per configuration.
 *
 * A job's BullMQ lock lasts as long as the lease the job takes. The lock
 * matters only once its worker has died: BullMQ finds the lock expired (it
 * looks every stalledInterval) and puts the job back, and whoever runs it
 * again takes only the payments whose leases have ended by then (the next
 * sweep finds them too, once their leases end). Tied to the lease, a stalled
 * job comes back about when its payments can be taken again; BullMQ's own
 * defaults (30 s and 30 s) would have it wait up to a minute, whatever the lease.
 */
export function reconciliationProcessorFor(config: AppConfig): Type<ReconciliationProcessor> {
  const { leaseMs } = config.idempotency;
  const { concurrency, paymentsPerS } = config.reconcile;
  const limiter = reconcileLimiter(paymentsPerS);
  @Processor(RECONCILIATION_QUEUE, {
    concurrency,
    // BullMQ's limiter is the queue's, in Redis: one rate for all the workers together.
    ...(limiter && { limiter }),
    lockDuration: leaseMs,
    stalledInterval: leaseMs,
    runRetryDelay: WORKER_RETRY_DELAY_MS,
  })
  class ConfiguredReconciliationProcessor extends ReconciliationProcessor {}
  return ConfiguredReconciliationProcessor;
}
