import { applyDecorators } from '@nestjs/common';
import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import {
  ArrayMaxSize,
  ArrayMinSize,
  ArrayUnique,
  IsArray,
  IsBoolean,
  IsDefined,
  IsIn,
  IsInt,
  IsOptional,
  IsString,
  Matches,
  Max,
  Min,
} from 'class-validator';
import { CodePointLength } from '../common/code-point-length';
import { PageQueryDto } from '../common/page-query.dto';
import { ENABLED_EVENT_CHOICES, WEBHOOK_ENDPOINT_ID_PATTERN } from './webhook-endpoint';
import type { EnabledEvent } from './webhook-endpoints.table';

const EVENTS_MESSAGE = `enabled_events must be a non-empty list of distinct values among ${ENABLED_EVENT_CHOICES.join(', ')}`;

const URL_DOC = { example: 'https://example.com/webhooks', maxLength: 2048, description: 'An absolute http or https URL, without credentials.' };

function EnabledEventsField(): PropertyDecorator {
  return applyDecorators(
    ApiPropertyOptional({ enum: ENABLED_EVENT_CHOICES, isArray: true, default: ['*'], description: 'Event types to send; `*`: all.' }),
    IsOptional(),
    IsArray({ message: EVENTS_MESSAGE }),
    ArrayMinSize(1, { message: EVENTS_MESSAGE }),
    ArrayMaxSize(ENABLED_EVENT_CHOICES.length, { message: EVENTS_MESSAGE }),
    ArrayUnique(undefined, { message: EVENTS_MESSAGE }),
    IsIn(ENABLED_EVENT_CHOICES, { each: true, message: EVENTS_MESSAGE }),
  );
}

function DescriptionField(): PropertyDecorator {
  return applyDecorators(
    ApiPropertyOptional({ maxLength: 500, description: 'Yours, for your own reference.' }),
    IsOptional(),
    IsString({ message: 'description must be a string' }),
    CodePointLength(0, 500, { message: 'description must be at most 500 characters' }),
  );
}

export class CreateWebhookEndpointDto {
  @ApiProperty(URL_DOC)
  @IsDefined({ message: 'url is required' })
  @IsString({ message: 'url must be a string' })
  url!: string;

  @EnabledEventsField()
  enabled_events?: EnabledEvent[];

  @DescriptionField()
  description?: string;
}

export class UpdateWebhookEndpointDto {
  @ApiPropertyOptional(URL_DOC)
  @IsOptional()
  @IsString({ message: 'url must be a string' })
  url?: string;

  @EnabledEventsField()
  enabled_events?: EnabledEvent[];

  @ApiPropertyOptional({ description: 'true disables the endpoint (and stops its pending deliveries); false enables it again.' })
  @IsOptional()
  @IsBoolean({ message: 'disabled must be true or false' })
  disabled?: boolean;

  @DescriptionField()
  description?: string;
}

export class RotateWebhookSecretDto {
  @ApiPropertyOptional({
    type: 'integer',
    minimum: 0,
    maximum: 168,
    default: 24,
    description: 'How long the current secret keeps signing beside the new one (0: it stops now).',
  })
  @IsOptional()
  @IsInt({ message: 'expires_in_hours must be an integer from 0 to 168' })
  @Min(0, { message: 'expires_in_hours must be an integer from 0 to 168' })
  @Max(168, { message: 'expires_in_hours must be an integer from 0 to 168' })
  expires_in_hours?: number;
}

export class ListWebhookEndpointsQueryDto extends PageQueryDto {
  @ApiPropertyOptional({ description: 'The id of the last endpoint of the previous page.', pattern: WEBHOOK_ENDPOINT_ID_PATTERN.source })
  @IsOptional()
  @IsString({ message: 'starting_after must be a webhook endpoint id' })
  @Matches(WEBHOOK_ENDPOINT_ID_PATTERN, { message: 'starting_after must be a webhook endpoint id' })
  starting_after?: string;
}
