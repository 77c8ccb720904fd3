import { Body, Controller, Delete, Get, Param, Post, Query, Req, Res, UseGuards, applyDecorators } from '@nestjs/common';
import { ApiBearerAuth, ApiHeader, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { Request, Response } from 'express';
import { ApiKeyGuard, CurrentClient } from '../clients/api-key.guard';
import { ClientThrottlerGuard } from '../clients/client-throttler.guard';
import type { ApiClient } from '../clients/clients.table';
import { AUTHENTICATED_ANSWERS, API_KEY_SCHEME, type Answer, ApiAnswers, DATABASE_UNAVAILABLE } from '../common/openapi';
import { RequestFingerprint } from '../idempotency/request-fingerprint.decorator';
import { REPLAYED, sendReply } from '../operations/idempotent-post';
import {
  DeletedWebhookEndpoint,
  WebhookEndpointList,
  WebhookEndpointResource,
  WebhookEndpointWithSecret,
} from './webhook-endpoint';
import {
  CreateWebhookEndpointDto,
  ListWebhookEndpointsQueryDto,
  RotateWebhookSecretDto,
  UpdateWebhookEndpointDto,
} from './webhook-endpoints.dto';
import { type EndpointWriteCommand, WebhookEndpointsService } from './webhook-endpoints.service';

const NOT_FOUND: Answer = { status: 404, description: 'No such webhook endpoint for this client (`resource_missing`).' };

/** A POST of these routes: the Idempotency-Key is optional, and means what it means on every POST. */
function EndpointPost(path: string, summary: string, ...answers: Answer[]): MethodDecorator {
  return applyDecorators(
    Post(path),
    ApiOperation({ summary }),
    ApiHeader({
      name: 'Idempotency-Key',
      required: false,
      description:
        'Optional. As on every POST: a retry with the same key and body gets the first answer again (`Idempotent-Replayed: true`), ' +
        'another request under it is 422; one key space per client, across routes.',
      schema: { type: 'string', minLength: 1, maxLength: 257 },
    }),
    ApiAnswers(
      ...answers,
      { status: 409, description: 'A concurrent request holds the same key (`idempotency_key_in_use`).' },
      { status: 422, description: 'The key was used with another request (`idempotency_key_reused`).' },
      DATABASE_UNAVAILABLE,
    ),
  );
}

function commandOf(client: ApiClient, fingerprint: string, request: Request): EndpointWriteCommand {
  return { clientId: client.id, idempotencyKeyHeader: request.headersDistinct['idempotency-key'], fingerprint };
}

@Controller('v1/webhook_endpoints')
@UseGuards(ApiKeyGuard, ClientThrottlerGuard)
@ApiTags('webhook endpoints')
@ApiBearerAuth(API_KEY_SCHEME)
@ApiAnswers(...AUTHENTICATED_ANSWERS)
export class WebhookEndpointsController {
  constructor(private readonly endpoints: WebhookEndpointsService) {}

  @EndpointPost(
    '',
    'Add a webhook endpoint: events of the types it asks for are delivered to it, signed with its own secret',
    { status: 201, description: 'The endpoint, with its `secret`: the only time it is shown.', type: WebhookEndpointWithSecret, headers: REPLAYED },
    {
      status: 400,
      description: 'Invalid body or URL (`parameter_invalid`), or 16 endpoints already (`webhook_endpoint_limit_reached`); nothing was written.',
    },
  )
  async create(
    @CurrentClient() client: ApiClient,
    @Body() body: CreateWebhookEndpointDto,
    @RequestFingerprint() fingerprint: string,
    @Req() request: Request,
    @Res() response: Response,
  ): Promise<void> {
    sendReply(response, await this.endpoints.create(commandOf(client, fingerprint, request), body));
  }

  @Get()
  @ApiOperation({ summary: 'List webhook endpoints, newest first' })
  @ApiAnswers(
    { status: 200, description: 'A page of endpoints (never their secrets).', type: WebhookEndpointList },
    { status: 400, description: 'Bad limit or cursor (`parameter_invalid`).' },
    DATABASE_UNAVAILABLE,
  )
  list(@CurrentClient() client: ApiClient, @Query() query: ListWebhookEndpointsQueryDto) {
    return this.endpoints.list(client.id, { limit: query.limit, startingAfter: query.starting_after });
  }

  @Get(':id')
  @ApiOperation({ summary: 'Read one webhook endpoint' })
  @ApiAnswers({ status: 200, description: 'The endpoint (never its secret).', type: WebhookEndpointResource }, NOT_FOUND, DATABASE_UNAVAILABLE)
  get(@CurrentClient() client: ApiClient, @Param('id') id: string) {
    return this.endpoints.get(client.id, id);
  }

  @EndpointPost(
    ':id',
    'Change a webhook endpoint: url, enabled_events, description, or disable it (its pending deliveries stop)',
    { status: 200, description: 'The endpoint as it now is.', type: WebhookEndpointResource, headers: REPLAYED },
    { status: 400, description: 'Invalid body or URL (`parameter_invalid`); nothing was changed.' },
    NOT_FOUND,
  )
  async update(
    @CurrentClient() client: ApiClient,
    @Param('id') id: string,
    @Body() body: UpdateWebhookEndpointDto,
    @RequestFingerprint() fingerprint: string,
    @Req() request: Request,
    @Res() response: Response,
  ): Promise<void> {
    sendReply(response, await this.endpoints.update(commandOf(client, fingerprint, request), id, body));
  }

  @EndpointPost(
    ':id/rotate_secret',
    'Replace the signing secret; the old one keeps signing beside it for expires_in_hours',
    { status: 200, description: 'The endpoint with its new `secret`: the only time it is shown.', type: WebhookEndpointWithSecret, headers: REPLAYED },
    { status: 400, description: 'Invalid body (`parameter_invalid`); nothing was changed.' },
    NOT_FOUND,
  )
  async rotateSecret(
    @CurrentClient() client: ApiClient,
    @Param('id') id: string,
    @Body() body: RotateWebhookSecretDto,
    @RequestFingerprint() fingerprint: string,
    @Req() request: Request,
    @Res() response: Response,
  ): Promise<void> {
    sendReply(response, await this.endpoints.rotateSecret(commandOf(client, fingerprint, request), id, body.expires_in_hours));
  }

  @Delete(':id')
  @ApiOperation({ summary: 'Delete a webhook endpoint: it gets nothing more, and its pending deliveries stop' })
  @ApiAnswers({ status: 200, description: 'Deleted.', type: DeletedWebhookEndpoint }, NOT_FOUND, DATABASE_UNAVAILABLE)
  delete(@CurrentClient() client: ApiClient, @Param('id') id: string) {
    return this.endpoints.delete(client.id, id);
  }
}
