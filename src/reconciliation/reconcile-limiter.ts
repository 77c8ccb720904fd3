import { RECONCILE_JOB_PAYMENTS } from './reconciliation.constants';

/** BullMQ's queue limiter: at most `max` jobs started in each window of `duration` ms, across every worker. */
export interface JobLimiter {
  max: number;
  duration: number;
}

/** The shortest window: below it, pace by starting more jobs per window instead. */
const MIN_WINDOW_MS = 10;

/**
 * The limiter that holds reconciliation to RECONCILE_RATE_LIMIT payments per
 * second (undefined for 0: no limit).
 *
 * BullMQ's limiter counts jobs, not payments, and its window is fixed: up to
 * `max` jobs start the moment a window opens, then none until the next. So a
 * job is counted as a full one (RECONCILE_JOB_PAYMENTS payments; a job of
 * fewer only drains slower than the limit), and the window is as short as it
 * can be: one job every 80 ms at 250 payments/s, rather than thirteen at the
 * start of each second, which new payments would feel as a burst. A sweep or a
 * prune run on the same queue takes one job's turn too; at the production
 * intervals (a sweep every 10 s, a prune every minute) that is a few payments
 * a minute.
 */
export function reconcileLimiter(paymentsPerS: number): JobLimiter | undefined {
  if (paymentsPerS <= 0) return undefined;
  const windowsPerS = 1_000 / MIN_WINDOW_MS;
  const max = Math.max(1, Math.ceil(paymentsPerS / (RECONCILE_JOB_PAYMENTS * windowsPerS)));
  // Rounded up, so the rate is the limit or just under it, never over.
  return { max, duration: Math.ceil((max * RECONCILE_JOB_PAYMENTS * 1_000) / paymentsPerS) };
}
