import type { IncomingMessage } from 'node:http';
import { Post, applyDecorators } from '@nestjs/common';
import { ApiHeader, ApiOperation } from '@nestjs/swagger';
import type { Response } from 'express';
import type { HttpReply } from '../common/http-reply';
import { type Answer, ApiAnswers, RETRY_AFTER } from '../common/openapi';
import { requestIdFor } from '../common/request-id';
import type { WriteCommand } from './idempotent-writes';

/** The header of an answer that may be replayed. */
export const REPLAYED = {
  'Idempotent-Replayed': { description: '`true` when this is the stored answer of an earlier request.', schema: { type: 'string' } },
} as const;

/** What every idempotent POST can answer besides its own outcomes. */
const WRITE_ANSWERS: Answer[] = [
  { status: 413, description: 'Body over 64 KB (`body_too_large`).' },
  { status: 415, description: 'Not a JSON body in UTF-8 (`unsupported_media_type`).' },
  {
    status: 422,
    description: 'The key was used with another body, or on another route: keys are one space per client (`idempotency_key_reused`).',
  },
  {
    status: 503,
    description:
      'The provider is unavailable and nothing was attempted (`provider_unavailable`), or the database is (`service_unavailable`): retry with the same key.',
    headers: RETRY_AFTER,
  },
];

/**
 * A route that runs an idempotent write (IdempotentWrites): POST, the
 * Idempotency-Key header, its own answers and the ones every such route shares.
 */
export function IdempotentPost(operation: { summary: string; description: string }, ...answers: Answer[]): MethodDecorator {
  return applyDecorators(
    Post(),
    ApiOperation(operation),
    ApiHeader({
      name: 'Idempotency-Key',
      required: true,
      description: '1 to 255 printable ASCII characters, bare or as a quoted string ("…"); unique per client, across routes.',
      schema: { type: 'string', minLength: 1, maxLength: 257, example: '8e03978e-40d5-43e8-bc93-6894a57f9324' },
    }),
    ApiAnswers(...answers, ...WRITE_ANSWERS),
  );
}

/** What a write takes from the request: its client, every copy of the key header, the fingerprint, the request id. */
export function writeCommandOf(clientId: string, fingerprint: string, request: IncomingMessage): WriteCommand {
  return {
    clientId,
    // Every copy of the header: Node joins repeated ones with ", ", which would read as one key.
    idempotencyKeyHeader: request.headersDistinct['idempotency-key'],
    fingerprint,
    requestId: requestIdFor(request),
  };
}

/** The reply as it is: a stored body is sent as its exact bytes, so a replay is byte-equal to the first answer. */
export function sendReply(response: Response, reply: HttpReply): void {
  response.status(reply.status).set(reply.headers).type('application/json').send(reply.body);
}
