import { ApiProperty } from '@nestjs/swagger';
import { newUlid } from '../common/ulid';
import { PaymentResource, type PaymentStatus } from '../payments/payment';
import type { EventRecord } from './events.table';

/** The statuses a payment can take after pending, each announced by one event. */
type AnnouncedStatus = Exclude<PaymentStatus, 'pending'>;

export const EVENT_TYPES = ['payment.succeeded', 'payment.failed', 'payment.requires_review'] as const;
export type EventType = (typeof EVENT_TYPES)[number];

export class EventData {
  @ApiProperty({ type: PaymentResource, description: 'The payment as it was right after the change.' })
  object!: PaymentResource;
}

/** The event object of the public API: what GET /v1/events shows and what a webhook carries. */
export class EventResource {
  @ApiProperty({ example: 'evt_01JDQ2ZC4R5S8V9W0X1Y2Z3A4D', pattern: '^evt_[0-9A-HJKMNP-TV-Z]{26}$' })
  id!: string;

  @ApiProperty({ enum: ['event'] })
  object!: 'event';

  @ApiProperty({ enum: EVENT_TYPES })
  type!: EventType;

  @ApiProperty({ format: 'date-time', description: 'When the change committed.' })
  created_at!: string;

  @ApiProperty({ type: EventData })
  data!: EventData;
}

/** A page of events, newest first. */
export class EventList {
  @ApiProperty({ enum: ['list'] })
  object!: 'list';

  @ApiProperty({ type: [EventResource] })
  data!: EventResource[];

  @ApiProperty({ description: 'Whether a page follows: ask again with starting_after = the last id.' })
  has_more!: boolean;
}

/** `evt_` and a ULID: what newEventId makes, and all an event id can be. */
export const EVENT_ID_PATTERN = /^evt_[0-9A-HJKMNP-TV-Z]{26}$/;

export function newEventId(): string {
  return `evt_${newUlid()}`;
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
