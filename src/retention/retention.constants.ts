export const RETENTION_QUEUE = 'retention';

export const RetentionJobName = {
  Prune: 'prune',
} as const;
