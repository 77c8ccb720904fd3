import { Body, Controller, Get, Param, Query, Req, Res, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { Request, Response } from 'express';
import { ApiKeyGuard, CurrentClient } from '../clients/api-key.guard';
import { ClientThrottlerGuard } from '../clients/client-throttler.guard';
import type { ApiClient } from '../clients/clients.table';
import { AUTHENTICATED_ANSWERS, API_KEY_SCHEME, ApiAnswers, DATABASE_UNAVAILABLE, RETRY_AFTER } from '../common/openapi';
import { RequestFingerprint } from '../idempotency/request-fingerprint.decorator';
import { DeclineEnvelope, PaymentList } from './payment';
import { PaymentResource } from '../ledger/payment-resource';
import { CreatePaymentDto, ListPaymentsQueryDto } from './payments.dto';
import { PaymentCreationService } from './payment-creation.service';
import { PaymentLookupService } from './payment-lookup.service';
import { IdempotentPost, REPLAYED, sendReply, writeCommandOf } from '../operations/idempotent-post';

/** Where the payments are created and read; EarlyAnswers answers its POST on this path too (src/http-app.ts). */
export const PAYMENTS_PATH = '/v1/payments';

@Controller(PAYMENTS_PATH)
@UseGuards(ApiKeyGuard, ClientThrottlerGuard)
@ApiTags('payments')
@ApiBearerAuth(API_KEY_SCHEME)
@ApiAnswers(...AUTHENTICATED_ANSWERS)
export class PaymentsController {
  constructor(
    private readonly creation: PaymentCreationService,
    private readonly lookup: PaymentLookupService,
  ) {}

  /** Guard and body validation run before the key is claimed or read. */
  @IdempotentPost(
    {
      summary: 'Create a payment, or get the answer of the request that already used this key',
      description:
        'The first request with a key charges at most once. A retry with the same key and body gets the same answer ' +
        'byte for byte (Idempotent-Replayed: true) once it is final; while it is not, the payment as it is (202).',
    },
    { status: 201, description: 'Charged.', type: PaymentResource, headers: REPLAYED },
    {
      status: 202,
      description: 'Outcome not known yet (pending, or in review): retry with the same key, or read the payment later.',
      type: PaymentResource,
      headers: RETRY_AFTER,
    },
    { status: 402, description: 'Declined (`card_declined`); replayed to a retry.', type: DeclineEnvelope, headers: REPLAYED },
    { status: 400, description: 'Invalid body, or a missing or invalid Idempotency-Key; nothing was written.' },
    {
      status: 409,
      description: 'The same key is still being processed (`idempotency_key_in_use`), or the order already has a payment that did not fail (`order_already_paid`).',
      headers: RETRY_AFTER,
    },
  )
  async create(
    @CurrentClient() client: ApiClient,
    @Body() body: CreatePaymentDto,
    @RequestFingerprint() fingerprint: string,
    @Req() request: Request,
    @Res() response: Response,
  ): Promise<void> {
    sendReply(response, await this.creation.create({ ...writeCommandOf(client.id, fingerprint, request), body }));
  }

  @Get(':id')
  @ApiOperation({ summary: 'Read one payment' })
  @ApiAnswers(
    { status: 200, description: 'The payment.', type: PaymentResource },
    { status: 404, description: 'No such payment for this client (`resource_missing`).' },
    DATABASE_UNAVAILABLE,
  )
  get(@CurrentClient() client: ApiClient, @Param('id') id: string) {
    return this.lookup.get(client.id, id);
  }

  @Get()
  @ApiOperation({ summary: 'List payments, newest first' })
  @ApiAnswers(
    { status: 200, description: 'A page of payments.', type: PaymentList },
    { status: 400, description: 'Bad limit or cursor (`parameter_invalid`).' },
    DATABASE_UNAVAILABLE,
  )
  list(@CurrentClient() client: ApiClient, @Query() query: ListPaymentsQueryDto) {
    return this.lookup.list(client.id, { limit: query.limit, startingAfter: query.starting_after });
  }
}
