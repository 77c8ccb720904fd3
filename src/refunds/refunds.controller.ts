import { Body, Controller, Get, Param, Query, Req, Res, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { Request, Response } from 'express';
import { ApiKeyGuard, CurrentClient } from '../clients/api-key.guard';
import { ClientThrottlerGuard } from '../clients/client-throttler.guard';
import type { ApiClient } from '../clients/clients.table';
import { AUTHENTICATED_ANSWERS, API_KEY_SCHEME, ApiAnswers, DATABASE_UNAVAILABLE, RETRY_AFTER } from '../common/openapi';
import { RequestFingerprint } from '../idempotency/request-fingerprint.decorator';
import { RefundResource } from '../ledger/refund-resource';
import { RefundFailedEnvelope, RefundList } from './refund';
import { CreateRefundDto, ListRefundsQueryDto } from './refunds.dto';
import { RefundsService } from './refunds.service';
import { IdempotentPost, REPLAYED, sendReply, writeCommandOf } from '../operations/idempotent-post';

/** Where the refunds are created and read; EarlyAnswers answers its POST on this path too (src/http-app.ts). */
export const REFUNDS_PATH = '/v1/refunds';

@Controller(REFUNDS_PATH)
@UseGuards(ApiKeyGuard, ClientThrottlerGuard)
@ApiTags('refunds')
@ApiBearerAuth(API_KEY_SCHEME)
@ApiAnswers(...AUTHENTICATED_ANSWERS)
export class RefundsController {
  constructor(private readonly refunds: RefundsService) {}

  /** As POST /v1/payments: guard and body validation run before the key is claimed or read. */
  @IdempotentPost(
    {
      summary: 'Refund a succeeded payment, or get the answer of the request that already used this key',
      description:
        'The first request with a key refunds at most once, and never more than is left of the payment. ' +
        "Keys are one space per client across every POST route: a payment's key sent here is 422 `idempotency_key_reused`.",
    },
    { status: 201, description: 'Refunded.', type: RefundResource, headers: REPLAYED },
    {
      status: 202,
      description: 'Outcome not known yet (pending, or in review): retry with the same key, or read the refund later.',
      type: RefundResource,
      headers: RETRY_AFTER,
    },
    { status: 402, description: 'The provider refused the refund (`refund_failed`); replayed to a retry.', type: RefundFailedEnvelope, headers: REPLAYED },
    {
      status: 400,
      description: 'Invalid body, a missing or invalid Idempotency-Key, or `amount` above what is left to refund (`amount_too_large`); nothing was written.',
    },
    { status: 404, description: 'No such payment for this client (`resource_missing`, `param: "payment"`).' },
    {
      status: 409,
      description: 'The same key is still being processed (`idempotency_key_in_use`), or the payment has not succeeded (`payment_not_refundable`).',
      headers: RETRY_AFTER,
    },
  )
  async create(
    @CurrentClient() client: ApiClient,
    @Body() body: CreateRefundDto,
    @RequestFingerprint() fingerprint: string,
    @Req() request: Request,
    @Res() response: Response,
  ): Promise<void> {
    sendReply(response, await this.refunds.create({ ...writeCommandOf(client.id, fingerprint, request), body }));
  }

  @Get(':id')
  @ApiOperation({ summary: 'Read one refund' })
  @ApiAnswers(
    { status: 200, description: 'The refund.', type: RefundResource },
    { status: 404, description: 'No such refund for this client (`resource_missing`).' },
    DATABASE_UNAVAILABLE,
  )
  get(@CurrentClient() client: ApiClient, @Param('id') id: string) {
    return this.refunds.get(client.id, id);
  }

  @Get()
  @ApiOperation({ summary: 'List refunds, newest first, of one payment or all' })
  @ApiAnswers(
    { status: 200, description: 'A page of refunds.', type: RefundList },
    { status: 400, description: 'Bad limit, payment or cursor (`parameter_invalid`).' },
    DATABASE_UNAVAILABLE,
  )
  list(@CurrentClient() client: ApiClient, @Query() query: ListRefundsQueryDto) {
    return this.refunds.list(client.id, { limit: query.limit, startingAfter: query.starting_after, paymentId: query.payment });
  }
}
