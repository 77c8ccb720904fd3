import { ApiProperty } from '@nestjs/swagger';
import { EVENT_TYPES } from '../ledger/outbox';
import type { EnabledEvent, EndpointStatus, WebhookEndpointRecord } from './webhook-endpoints.table';

/** `we_` and a ULID: all an endpoint id can be. */
export const WEBHOOK_ENDPOINT_ID_PATTERN = /^we_[0-9A-HJKMNP-TV-Z]{26}$/;
/** What a client may hold at once; webhook_endpoints_slot_key holds the schema to it. */
export const MAX_ENDPOINTS_PER_CLIENT = 16;
export const ENABLED_EVENT_CHOICES: readonly EnabledEvent[] = ['*', ...EVENT_TYPES];

/** The endpoint object of the public API. */
export class WebhookEndpointResource {
  @ApiProperty({ example: 'we_01JDQ2ZC4R5S8V9W0X1Y2Z3A4E', pattern: WEBHOOK_ENDPOINT_ID_PATTERN.source })
  id!: string;

  @ApiProperty({ enum: ['webhook_endpoint'] })
  object!: 'webhook_endpoint';

  @ApiProperty({ example: 'https://example.com/webhooks', description: 'Where events are POSTed, signed per Standard Webhooks.' })
  url!: string;

  @ApiProperty({
    enum: ENABLED_EVENT_CHOICES,
    isArray: true,
    description: 'The event types sent to this endpoint; `["*"]`: every type.',
  })
  enabled_events!: EnabledEvent[];

  @ApiProperty({ enum: ['enabled', 'disabled'], description: 'A disabled endpoint gets nothing, and its pending deliveries stopped.' })
  status!: EndpointStatus;

  @ApiProperty({ type: 'string', nullable: true, maxLength: 500 })
  description!: string | null;

  @ApiProperty({ format: 'date-time' })
  created_at!: string;
}

/** The endpoint with its signing secret: the answer of a creation and of a rotation, the only ones that show it. */
export class WebhookEndpointWithSecret extends WebhookEndpointResource {
  @ApiProperty({
    example: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
    description: 'Verify deliveries with it (Standard Webhooks). Shown only here: keep it.',
  })
  secret!: string;
}

export class WebhookEndpointList {
  @ApiProperty({ enum: ['list'] })
  object!: 'list';

  @ApiProperty({ type: [WebhookEndpointResource] })
  data!: WebhookEndpointResource[];

  @ApiProperty({ description: 'Whether a page follows: ask again with starting_after = the last id.' })
  has_more!: boolean;
}

export class DeletedWebhookEndpoint {
  @ApiProperty({ pattern: WEBHOOK_ENDPOINT_ID_PATTERN.source })
  id!: string;

  @ApiProperty({ enum: ['webhook_endpoint'] })
  object!: 'webhook_endpoint';

  @ApiProperty({ enum: [true] })
  deleted!: true;
}

export function toWebhookEndpointResource(row: WebhookEndpointRecord): WebhookEndpointResource {
  return {
    id: row.id,
    object: 'webhook_endpoint',
    url: row.url,
    enabled_events: row.enabledEvents,
    status: row.status,
    description: row.description,
    created_at: row.createdAt.toISOString(),
  };
}
