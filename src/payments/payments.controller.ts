import { Body, Controller, Get, Param, Post, Query, Req, Res, UseGuards } from '@nestjs/common';
import type { Request, Response } from 'express';
import { ApiKeyGuard, CurrentClient } from '../clients/api-key.guard';
import { ClientThrottlerGuard } from '../clients/client-throttler.guard';
import type { ApiClient } from '../clients/clients.table';
import { requestIdFor } from '../common/request-id';
import { RequestFingerprint } from '../idempotency/request-fingerprint.decorator';
import { CreatePaymentDto, ListPaymentsQueryDto } from './payments.dto';
import { PaymentCreationService } from './payment-creation.service';
import { PaymentLookupService } from './payment-lookup.service';

@Controller('v1/payments')
@UseGuards(ApiKeyGuard, ClientThrottlerGuard)
export class PaymentsController {
  constructor(
    private readonly creation: PaymentCreationService,
    private readonly lookup: PaymentLookupService,
  ) {}

  /**
   * The body is sent as the exact stored bytes, so a replay is byte-equal to
   * the first answer. Guard and body validation run before the key is read.
   */
  @Post()
  async create(
    @CurrentClient() client: ApiClient,
    @Body() body: CreatePaymentDto,
    @RequestFingerprint() fingerprint: string,
    @Req() request: Request,
    @Res() response: Response,
  ): Promise<void> {
    const reply = await this.creation.create({
      clientId: client.id,
      // Every copy of the header: Node joins repeated ones with ", ", which
      // would read as one key.
      idempotencyKeyHeader: request.headersDistinct['idempotency-key'],
      fingerprint,
      body,
      requestId: requestIdFor(request),
    });
    response.status(reply.status).set(reply.headers).type('application/json').send(reply.body);
  }

  @Get(':id')
  get(@CurrentClient() client: ApiClient, @Param('id') id: string) {
    return this.lookup.get(client.id, id);
  }

  @Get()
  list(@CurrentClient() client: ApiClient, @Query() query: ListPaymentsQueryDto) {
    return this.lookup.list(client.id, { limit: query.limit, startingAfter: query.starting_after });
  }
}
