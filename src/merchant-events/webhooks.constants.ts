export const WEBHOOKS_QUEUE = 'webhooks';

export const WebhookJobName = {
  Dispatch: 'dispatch',
  Deliver: 'deliver',
} as const;
