import type { OperationName } from '../ledger/operation';

export const RECONCILIATION_QUEUE = 'reconciliation';

export const JobName = {
  Sweep: 'sweep',
  Reconcile: 'reconcile',
  PruneKeys: 'prune-keys',
} as const;

/**
 * The rows of one operation (payments or refunds) to reconcile, of one
 * client: every statement of the job names its client. A job carries up to
 * RECONCILE_JOB_PAYMENTS of them. The forms with `paymentIds` and with one
 * `paymentId` are what earlier versions queued, still taken (as payments).
 */
export type ReconcileJobData =
  | { clientId: string; operation: OperationName; ids: string[] }
  | { clientId: string; paymentIds: string[] }
  | { clientId: string; paymentId: string };

/**
 * Rows (payments or refunds) per reconcile job. The statements that take their leases (one, with
 * their reads) and commit their outcomes (one transaction) and the job's own
 * moves in Redis are paid once per job instead of once per payment; the job's
 * payments are asked one after another, so a worker still has at most
 * RECONCILE_CONCURRENCY provider calls in flight.
 */
export const RECONCILE_JOB_PAYMENTS = 20;
