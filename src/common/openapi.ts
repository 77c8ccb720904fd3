import { type INestApplication, type Type, applyDecorators } from '@nestjs/common';
import { ApiExtraModels, ApiProperty, ApiPropertyOptional, ApiResponse, DocumentBuilder, type OpenAPIObject, SwaggerModule, getSchemaPath } from '@nestjs/swagger';
import { ErrorCode } from './domain-error';
import { TransportErrorCode } from './transport-error';

/** The name of the bearer scheme every /v1 route but the provider's requires. */
export const API_KEY_SCHEME = 'api_key';

const ERROR_TYPES = [
  'invalid_request_error',
  'idempotency_error',
  'authentication_error',
  'card_error',
  'rate_limit_error',
  'api_error',
];

export class ErrorBody {
  @ApiProperty({ enum: ERROR_TYPES })
  type!: string;

  @ApiProperty({ enum: [...Object.values(ErrorCode), ...Object.values(TransportErrorCode)], example: 'parameter_invalid' })
  code!: string;

  @ApiProperty({ example: 'amount must be at least 1' })
  message!: string;

  @ApiPropertyOptional({ description: 'The request field at fault.', example: 'amount' })
  param?: string;

  @ApiPropertyOptional({ description: 'The request id of our log line, on 5xx answers only.' })
  request_id?: string;
}

/** Every error answer: `{"error":{…}}`. */
export class ErrorEnvelope {
  @ApiProperty({ type: ErrorBody })
  error!: ErrorBody;
}

/** The answer each status of a route gives: a schema (a class), or an error envelope. */
export type Answer = { status: number; description: string; type?: Type<unknown>; headers?: Record<string, { description: string; schema: { type: 'string' | 'integer' } }> };

export const RETRY_AFTER = { 'Retry-After': { description: 'Seconds to wait before retrying.', schema: { type: 'integer' } } } as const;

/** Documents each answer; an answer without a type is an error envelope. */
export function ApiAnswers(...answers: Answer[]): MethodDecorator & ClassDecorator {
  return applyDecorators(
    ApiExtraModels(ErrorEnvelope),
    ...answers.map(({ status, description, type, headers }) =>
      ApiResponse({
        status,
        description,
        headers,
        ...(type ? { type } : { schema: { $ref: getSchemaPath(ErrorEnvelope) } }),
      }),
    ),
  );
}

/** The answers every authenticated route can give, whatever it does. */
export const AUTHENTICATED_ANSWERS: Answer[] = [
  { status: 401, description: 'Missing, unknown, revoked, expired or repeated API key (`unauthenticated`).' },
  { status: 429, description: 'Over the rate limit (`rate_limited`).', headers: RETRY_AFTER },
];

export const DATABASE_UNAVAILABLE: Answer = {
  status: 503,
  description: 'The database is unreachable or every connection is busy (`service_unavailable`); nothing was done.',
  headers: RETRY_AFTER,
};

/** The OpenAPI document, served at /docs (UI) and /docs-json, and committed as docs/openapi.json. */
export function openApiDocument(app: INestApplication): OpenAPIObject {
  const config = new DocumentBuilder()
    .setTitle('Payments API')
    .setVersion('1')
    .setDescription(
      'A payment is charged at most once and never lost, however often a client retries. ' +
        'Send an Idempotency-Key with every POST /v1/payments: a retry with the same key gets the first answer ' +
        'back byte for byte (Idempotent-Replayed: true), the same key with another body is 422, and an outcome ' +
        'still unknown is 202 with the pending payment, finished later by the worker.',
    )
    .setLicense('MIT', 'https://opensource.org/license/mit')
    // Relative: the document describes whichever host serves it.
    .addServer('/')
    .addBearerAuth(
      {
        type: 'http',
        scheme: 'bearer',
        bearerFormat: 'sk_… (an opaque API key)',
        description: 'One of the client’s API keys (`sk_…`), from `npm run client:create` or `npm run client:key`, shown once.',
      },
      API_KEY_SCHEME,
    )
    .build();
  const document = SwaggerModule.createDocument(app, config);
  // An operation that names no scheme takes no API key (the health checks,
  // the provider's signed events): say so, rather than leave it unsaid.
  for (const path of Object.values(document.paths)) {
    for (const operation of [path.get, path.post]) {
      if (operation && !operation.security) operation.security = [];
    }
  }
  return document;
}

export function serveOpenApi(app: INestApplication): void {
  SwaggerModule.setup('docs', app, () => openApiDocument(app), { jsonDocumentUrl: 'docs-json' });
}
