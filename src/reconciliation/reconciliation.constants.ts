export const RECONCILIATION_QUEUE = 'reconciliation';

export const JobName = {
  Sweep: 'sweep',
  Reconcile: 'reconcile',
  PruneKeys: 'prune-keys',
} as const;

/**
 * The payments to reconcile, of one client: every statement of the job names
 * its client. A job carries up to RECONCILE_JOB_PAYMENTS of them; the form
 * with one `paymentId` is what earlier versions queued, still taken.
 */
export type ReconcileJobData = { clientId: string; paymentIds: string[] } | { clientId: string; paymentId: string };

/**
 * Payments per reconcile job. The statements that take their leases (one, with
 * their reads) and commit their outcomes (one transaction) and the job's own
 * moves in Redis are paid once per job instead of once per payment; the job's
 * payments are asked one after another, so a worker still has at most
 * RECONCILE_CONCURRENCY provider calls in flight.
 */
export const RECONCILE_JOB_PAYMENTS = 20;
