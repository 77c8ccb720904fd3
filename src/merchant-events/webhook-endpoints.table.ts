import { col, defineTable } from '../database/table';

/** Where one client's events are pushed. */
export const webhookEndpointsTable = defineTable('webhook_endpoints', {
  id: col.uuid('id'),
  clientId: col.uuid('client_id'),
  url: col.text('url'),
  /** `whsec_…`: what the merchant verifies signatures with; shown once, by client:create. */
  secret: col.text('secret'),
  createdAt: col.timestamptz('created_at'),
});
