import { type RecordOf, col, defineTable } from '../database/table';
import type { EventType } from '../ledger/outbox';

export type EndpointStatus = 'enabled' | 'disabled';
/** What an endpoint asks for: event types, or `*` for every type. */
export type EnabledEvent = EventType | '*';

/** Where one client's events are pushed: up to 16 live endpoints per client. */
export const webhookEndpointsTable = defineTable('webhook_endpoints', {
  id: col.text('id'),
  clientId: col.uuid('client_id'),
  url: col.text('url'),
  enabledEvents: col.textArray<EnabledEvent>('enabled_events'),
  status: col.text<EndpointStatus>('status'),
  description: col.text('description').orNull(),
  /** The `whsec_…` secret deliveries are signed with, sealed (common/secret-box.ts); NULL once deleted. */
  secretCiphertext: col.text('secret_ciphertext').orNull(),
  /** The secret a rotation replaced, sealed: deliveries carry its signature too until it expires. */
  previousSecretCiphertext: col.text('previous_secret_ciphertext').orNull(),
  previousSecretExpiresAt: col.timestamptz('previous_secret_expires_at').orNull(),
  /** 1 to 16 while the endpoint lives (webhook_endpoints_slot_key bounds a client's endpoints); NULL once deleted. */
  slot: col.smallint('slot').orNull(),
  deletedAt: col.timestamptz('deleted_at').orNull(),
  createdAt: col.timestamptz('created_at'),
});

export type WebhookEndpointRecord = RecordOf<typeof webhookEndpointsTable>;
