import { Controller, HttpCode, Post, Req } from '@nestjs/common';
import type { Request } from 'express';
import { rawBodyOf } from '../common/raw-body';
import { ProviderEventsService } from './provider-events.service';

export const PROVIDER_EVENTS_PATH = '/v1/provider/events';

/**
 * The provider's events. No API key: the Standard Webhooks signature is the
 * authentication, checked over the raw bytes before anything else.
 */
@Controller(PROVIDER_EVENTS_PATH)
export class ProviderEventsController {
  constructor(private readonly events: ProviderEventsService) {}

  /** 200 only once the event's effect (or its record as a duplicate or stale) is committed. */
  @Post()
  @HttpCode(200)
  async receive(@Req() request: Request): Promise<{ received: true; result: string }> {
    const result = await this.events.receive(rawBodyOf(request), request.headers);
    return { received: true, result };
  }
}
