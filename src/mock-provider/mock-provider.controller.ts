import { Body, Controller, Get, Param, Post, Res, UseInterceptors } from '@nestjs/common';
import { setTimeout as delay } from 'node:timers/promises';
import type { Response } from 'express';
import { CreateChargeDto, IdempotencyKey } from './mock-provider.dto';
import { ChargeEventEmitter } from './mock-provider.emitter';
import { FaultInjectionInterceptor } from './mock-provider.interceptor';
import { MockProviderService } from './mock-provider.service';
import type { Charge, ListedChargeEvent } from './mock-provider.types';

@Controller()
export class MockProviderController {
  constructor(
    private readonly service: MockProviderService,
    private readonly events: ChargeEventEmitter,
  ) {}

  @Get('health')
  health(): { status: 'ok' } {
    return { status: 'ok' };
  }

  @Get('charges')
  list(): Charge[] {
    return this.service.listCharges();
  }

  @Get('charges/:providerKey')
  @UseInterceptors(FaultInjectionInterceptor)
  get(@Param('providerKey') providerKey: string): Charge {
    return this.service.getCharge(providerKey);
  }

  /** Every event emitted, oldest first, with its delivery state; spared fault injection, like GET /charges. */
  @Get('events')
  listEvents(): ListedChargeEvent[] {
    return this.events.listEvents();
  }

  /** Replies by hand: the lost-response token must be able to not reply at all. */
  @Post('charges')
  @UseInterceptors(FaultInjectionInterceptor)
  async create(
    @IdempotencyKey() key: string,
    @Body() body: CreateChargeDto,
    @Res() response: Response,
  ): Promise<void> {
    const outcome = this.service.createCharge(key, body);
    if (outcome.reply === 'never') {
      response.socket?.destroy();
      return;
    }
    if (outcome.reply === 'after') await delay(outcome.delayMs);
    response.status(201).json(outcome.charge);
  }
}
