export const RECONCILIATION_QUEUE = 'reconciliation';

export const JobName = {
  Sweep: 'sweep',
  Reconcile: 'reconcile',
  PruneKeys: 'prune-keys',
} as const;

export interface ReconcileJobData {
  paymentId: string;
}
