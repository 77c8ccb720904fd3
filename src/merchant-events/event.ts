import { ApiExtraModels, ApiProperty, getSchemaPath } from '@nestjs/swagger';
import { PaymentResource } from '../ledger/payment-resource';
import { RefundResource } from '../ledger/refund-resource';
import type { EventRecord } from '../ledger/events.table';
import { EVENT_TYPES, type EventType } from '../ledger/outbox';

@ApiExtraModels(PaymentResource, RefundResource)
export class EventData {
  @ApiProperty({
    oneOf: [{ $ref: getSchemaPath(PaymentResource) }, { $ref: getSchemaPath(RefundResource) }],
    description: 'The payment (payment.* events) or the refund (refund.* events) as it was right after the change.',
  })
  object!: PaymentResource | RefundResource;
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

export function toEventResource(event: EventRecord): EventResource {
  return {
    id: event.id,
    object: 'event',
    type: event.type,
    created_at: event.createdAt.toISOString(),
    data: event.data,
  };
}
