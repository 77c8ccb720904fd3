import { Body, Controller, Get, Param, Post, Query, Req, Res, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiHeader, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { Request, Response } from 'express';
import { ApiKeyGuard, CurrentClient } from '../clients/api-key.guard';
import { ClientThrottlerGuard } from '../clients/client-throttler.guard';
import type { ApiClient } from '../clients/clients.table';
import { AUTHENTICATED_ANSWERS, API_KEY_SCHEME, ApiAnswers, DATABASE_UNAVAILABLE, RETRY_AFTER } from '../common/openapi';
import { requestIdFor } from '../common/request-id';
import { RequestFingerprint } from '../idempotency/request-fingerprint.decorator';
import { RefundResource } from '../ledger/refund-resource';
import { RefundFailedEnvelope, RefundList } from './refund';
import { CreateRefundDto, ListRefundsQueryDto } from './refunds.dto';
import { RefundsService } from './refunds.service';

const REPLAYED = {
  'Idempotent-Replayed': { description: '`true` when this is the stored answer of an earlier request.', schema: { type: 'string' } },
} as const;

@Controller('v1/refunds')
@UseGuards(ApiKeyGuard, ClientThrottlerGuard)
@ApiTags('refunds')
@ApiBearerAuth(API_KEY_SCHEME)
@ApiAnswers(...AUTHENTICATED_ANSWERS)
export class RefundsController {
  constructor(private readonly refunds: RefundsService) {}

  /** As POST /v1/payments: the stored bytes are sent as they are, so a replay is byte-equal. */
  @Post()
  @ApiOperation({
    summary: 'Refund a succeeded payment, or get the answer of the request that already used this key',
    description:
      'The first request with a key refunds at most once. Keys are one space per client across every POST route: ' +
      "a payment's key sent here is 422 `idempotency_key_reused`.",
  })
  @ApiHeader({
    name: 'Idempotency-Key',
    required: true,
    description: '1 to 255 printable ASCII characters, bare or as a quoted string ("…"); unique per client across routes.',
    schema: { type: 'string', minLength: 1, maxLength: 257, example: '1f6d6a3e-5f55-4a0e-9d5e-2b8c8f3f0e11' },
  })
  @ApiAnswers(
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
    { status: 413, description: 'Body over 64 KB (`body_too_large`).' },
    { status: 415, description: 'Not a JSON body in UTF-8 (`unsupported_media_type`).' },
    { status: 422, description: 'The key was used with another body or on another route (`idempotency_key_reused`).' },
    {
      status: 503,
      description: 'The provider is unavailable and nothing was attempted (`provider_unavailable`), or the database is (`service_unavailable`): retry with the same key.',
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
    const reply = await this.refunds.create({
      clientId: client.id,
      idempotencyKeyHeader: request.headersDistinct['idempotency-key'],
      fingerprint,
      body,
      requestId: requestIdFor(request),
    });
    response.status(reply.status).set(reply.headers).type('application/json').send(reply.body);
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
