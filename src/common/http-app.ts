import type { INestApplication } from '@nestjs/common';
import { DocumentBuilder, SwaggerModule } from '@nestjs/swagger';
import express, { type NextFunction, type Request, type Response } from 'express';
import { Metrics } from '../metrics/metrics';
import { httpMetricsMiddleware } from '../metrics/http-metrics';
import { DomainError, ErrorCode } from './domain-error';
import { errorReply, fromBodyParserError } from './error-envelope';
import { keepJsonBytes, parsedBodyProblem } from './json-body';
import { ErrorEnvelopeFilter } from './error-envelope.filter';
import { keepRawBody } from './raw-body';
import type { TransportError } from './transport-error';
import { REQUEST_ID_HEADER, requestIdFor } from './request-id';
import { StrictValidationPipe } from './validation';

/** Large enough for every field at its limit; anything bigger is refused unread. */
const BODY_LIMIT = '64kb';

/**
 * HTTP set-up shared by the API's entry point and the e2e tests, so the tests
 * exercise the same pipeline. The app must be created with bodyParser: false.
 */
/** An error answered by a middleware, before Nest's filter could: the same envelope, and a request id. */
function refuseBeforeRouting(request: Request, response: Response, error: DomainError | TransportError): void {
  const reply = errorReply(error);
  response.setHeader(REQUEST_ID_HEADER, requestIdFor(request));
  response.status(reply.status).set(reply.headers).type('application/json').send(reply.body);
}

export function configureHttpApp(app: INestApplication): void {
  (app.getHttpAdapter().getInstance() as express.Express).disable('x-powered-by');
  app.use(httpMetricsMiddleware(app.get(Metrics)));
  app.use(
    express.json({
      limit: BODY_LIMIT,
      strict: false,
      type: 'application/json',
      verify: (request, response, bytes, charset) => {
        keepRawBody(request, response, bytes);
        keepJsonBytes(request, bytes, charset);
      },
    }),
  );
  // Answered here, before any route or the request logger has run, so that a
  // malformed or oversized body gets its own code (body_invalid_json,
  // body_too_large) and still carries a request id.
  app.use((error: unknown, request: Request, response: Response, next: NextFunction) => {
    const parserError = fromBodyParserError(error);
    if (!parserError) return next(error);
    refuseBeforeRouting(request, response, parserError);
  });
  // What the parser accepted but nothing after it may read (see
  // parsedBodyProblem): refused before the fingerprint, validation or the
  // database see it.
  app.use((request: Request, response: Response, next: NextFunction) => {
    const problem = parsedBodyProblem(request);
    if (!problem) return next();
    const details = problem.param === '' ? {} : { param: problem.param };
    refuseBeforeRouting(request, response, new DomainError(ErrorCode.ParameterInvalid, problem.message, details));
  });
  app.useGlobalPipes(new StrictValidationPipe());
  app.useGlobalFilters(new ErrorEnvelopeFilter());
  // Exit 0 once drained rather than re-raise the signal: a deliberate stop is not a crash.
  app.enableShutdownHooks(['SIGTERM', 'SIGINT'], { useProcessExit: true });

  const openApi = new DocumentBuilder()
    .setTitle('Payments API')
    .setDescription('Idempotent payments: a retried request never charges twice. See README.md.')
    .addBearerAuth()
    .build();
  SwaggerModule.setup('docs', app, SwaggerModule.createDocument(app, openApi), { jsonDocumentUrl: 'docs-json' });
}
