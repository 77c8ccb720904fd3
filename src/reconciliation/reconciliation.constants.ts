export const RECONCILIATION_QUEUE = 'reconciliation';

export const JobName = {
  Sweep: 'sweep',
  Reconcile: 'reconcile',
  PruneKeys: 'prune-keys',
} as const;

/** The payment to reconcile, named by client and id: every statement of the job names its client. */
export interface ReconcileJobData {
  clientId: string;
  paymentId: string;
}
