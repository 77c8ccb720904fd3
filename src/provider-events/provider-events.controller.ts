import { Controller, HttpCode, Post, Req, applyDecorators } from '@nestjs/common';
import { ApiBody, ApiHeader, ApiOperation, ApiProperty, ApiTags } from '@nestjs/swagger';
import type { Request } from 'express';
import { ApiAnswers, DATABASE_UNAVAILABLE } from '../common/openapi';
import { rawBodyOf } from '../common/raw-body';
import { ProviderEventsService } from './provider-events.service';

export const PROVIDER_EVENTS_PATH = '/v1/provider/events';

/**
 * The provider's events. No API key: the Standard Webhooks signature is the
 * authentication, checked over the raw bytes before anything else.
 */
class ProviderEventReceipt {
  @ApiProperty({ enum: [true] })
  received!: true;

  @ApiProperty({ enum: ['applied', 'noted', 'duplicate', 'stale', 'unknown_charge', 'unknown_refund'] })
  result!: string;
}

const SIGNATURE_HEADERS = ['webhook-id', 'webhook-timestamp', 'webhook-signature'];

@Controller(PROVIDER_EVENTS_PATH)
@ApiTags('provider')
export class ProviderEventsController {
  constructor(private readonly events: ProviderEventsService) {}

  /** 200 only once the event's effect (or its record as a duplicate or stale) is committed. */
  @Post()
  @HttpCode(200)
  @ApiOperation({
    summary: 'The payment provider’s charge events (for the provider, not for clients)',
    description: 'No API key: a Standard Webhooks signature made with PROVIDER_WEBHOOK_SECRET authenticates the event.',
  })
  @ApiBody({ schema: { type: 'object', description: 'A charge event: id, type charge.*, created_at, data (the charge and its version).' } })
  @applyDecorators(...SIGNATURE_HEADERS.map((name) => ApiHeader({ name, required: true })))
  @ApiAnswers(
    { status: 200, description: 'Committed (or recognised as a duplicate or a stale version).', type: ProviderEventReceipt },
    { status: 400, description: 'Bad signature, timestamp or body (`webhook_signature_invalid`, `parameter_invalid`); nothing written.' },
    { status: 409, description: 'The payment is busy (`payment_busy`): deliver again later.' },
    DATABASE_UNAVAILABLE,
  )
  async receive(@Req() request: Request): Promise<{ received: true; result: string }> {
    const result = await this.events.receive(rawBodyOf(request), request.body, request.headers);
    return { received: true, result };
  }
}
