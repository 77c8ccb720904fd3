import { ulid } from 'ulid';
import type { PaymentResource, PaymentStatus } from '../payments/payment';
import type { EventRecord } from './events.table';

/** The statuses a payment can take after pending, each announced by one event. */
type AnnouncedStatus = Exclude<PaymentStatus, 'pending'>;

export const EVENT_TYPES = ['payment.succeeded', 'payment.failed', 'payment.requires_review'] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/** The event object of the public API: what GET /v1/events shows and what a webhook carries. */
export interface EventResource {
  id: string;
  object: 'event';
  type: EventType;
  created_at: string;
  data: { object: PaymentResource };
}

/** `evt_` and a ULID: what newEventId makes, and all an event id can be. */
export const EVENT_ID_PATTERN = /^evt_[0-9A-HJKMNP-TV-Z]{26}$/;

export function newEventId(): string {
  return `evt_${ulid()}`;
}

export function eventTypeFor(status: AnnouncedStatus): EventType {
  return `payment.${status}`;
}

export function toEventResource(event: EventRecord): EventResource {
  return {
    id: event.id,
    object: 'event',
    type: event.type,
    created_at: event.createdAt.toISOString(),
    data: event.data,
  };
}
