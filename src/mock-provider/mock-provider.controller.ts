import { Body, Controller, Get, Param, Post, Res, UseInterceptors } from '@nestjs/common';
import { setTimeout as delay } from 'node:timers/promises';
import type { Response } from 'express';
import { CreateChargeDto, CreateRefundDto, IdempotencyKey } from './mock-provider.dto';
import { ProviderEventEmitter } from './mock-provider.emitter';
import { FaultInjectionInterceptor } from './mock-provider.interceptor';
import { MockProviderService, type Reply } from './mock-provider.service';
import type { Charge, ListedProviderEvent, Refund } from './mock-provider.types';

@Controller()
export class MockProviderController {
  constructor(
    private readonly service: MockProviderService,
    private readonly events: ProviderEventEmitter,
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

  /** Every refund held, for audits and tests; spared fault injection, like GET /charges. */
  @Get('refunds')
  listRefunds(): Refund[] {
    return this.service.listRefunds();
  }

  @Get('refunds/:providerKey')
  @UseInterceptors(FaultInjectionInterceptor)
  getRefund(@Param('providerKey') providerKey: string): Refund {
    return this.service.getRefund(providerKey);
  }

  /** Every event emitted, oldest first, with its delivery state; spared fault injection, like GET /charges. */
  @Get('events')
  listEvents(): ListedProviderEvent[] {
    return this.events.listEvents();
  }

  @Post('charges')
  @UseInterceptors(FaultInjectionInterceptor)
  async create(
    @IdempotencyKey() key: string,
    @Body() body: CreateChargeDto,
    @Res() response: Response,
  ): Promise<void> {
    const outcome = this.service.createCharge(key, body);
    await created(response, outcome, outcome.charge);
  }

  @Post('refunds')
  @UseInterceptors(FaultInjectionInterceptor)
  async createRefund(
    @IdempotencyKey() key: string,
    @Body() body: CreateRefundDto,
    @Res() response: Response,
  ): Promise<void> {
    const outcome = this.service.createRefund(key, body);
    await created(response, outcome, outcome.refund);
  }
}

/** Replies by hand: the lost-response tokens must be able to not reply at all. */
async function created(response: Response, reply: Reply, body: Charge | Refund): Promise<void> {
  if (reply.reply === 'never') {
    response.socket?.destroy();
    return;
  }
  if (reply.reply === 'after') await delay(reply.delayMs);
  response.status(201).json(body);
}
