import type { INestApplication } from '@nestjs/common';
import { DocumentBuilder, SwaggerModule } from '@nestjs/swagger';
import express, { type NextFunction, type Request, type Response } from 'express';
import type { Server } from 'node:http';
import { Metrics } from '../metrics/metrics';
import { httpMetricsMiddleware } from '../metrics/http-metrics';
import { allowedMethods } from './allowed-methods';
import { answerClientErrorsInEnvelope } from './client-error';
import { DomainError, ErrorCode } from './domain-error';
import { errorReply, fromBodyParserError } from './error-envelope';
import { keepJsonBytes, parsedBodyProblem } from './json-body';
import { ErrorEnvelopeFilter } from './error-envelope.filter';
import { ANSWER_HEADERS } from './http-reply';
import { keepRawBody } from './raw-body';
import type { TransportError } from './transport-error';
import { REQUEST_ID_HEADER, requestIdFor } from './request-id';
import { StrictValidationPipe } from './validation';

/** Large enough for every field at its limit; anything bigger is refused unread. */
const BODY_LIMIT = '64kb';

/** An error answered by a middleware, before Nest's filter could: the same envelope. */
function refuseBeforeRouting(response: Response, error: DomainError | TransportError): void {
  const reply = errorReply(error);
  response.status(reply.status).set(reply.headers).type('application/json').send(reply.body);
}

/**
 * HTTP set-up shared by the API's entry point and the e2e tests, so the tests
 * exercise the same pipeline. The app must be created with bodyParser: false.
 */
export function configureHttpApp(app: INestApplication): void {
  const expressApp = app.getHttpAdapter().getInstance() as express.Express;
  expressApp.disable('x-powered-by');
  answerClientErrorsInEnvelope(app.getHttpServer() as Server);
  // First, so that every answer carries them, whichever layer writes it.
  app.use((request: Request, response: Response, next: NextFunction) => {
    response.set(ANSWER_HEADERS).setHeader(REQUEST_ID_HEADER, requestIdFor(request));
    next();
  });
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
  // body_too_large).
  app.use((error: unknown, _request: Request, response: Response, next: NextFunction) => {
    const parserError = fromBodyParserError(error);
    if (!parserError) return next(error);
    refuseBeforeRouting(response, parserError);
  });
  // What the parser accepted but nothing after it may read (see
  // parsedBodyProblem): refused before the fingerprint, validation or the
  // database see it.
  app.use((request: Request, response: Response, next: NextFunction) => {
    const problem = parsedBodyProblem(request);
    if (!problem) return next();
    const details = problem.param === '' ? {} : { param: problem.param };
    refuseBeforeRouting(response, new DomainError(ErrorCode.ParameterInvalid, problem.message, details));
  });
  app.useGlobalPipes(new StrictValidationPipe());
  app.useGlobalFilters(new ErrorEnvelopeFilter((request) => allowedMethods(expressApp.router, request.path)));
  // Exit 0 once drained rather than re-raise the signal: a deliberate stop is not a crash.
  app.enableShutdownHooks(['SIGTERM', 'SIGINT'], { useProcessExit: true });

  const openApi = new DocumentBuilder()
    .setTitle('Payments API')
    .setDescription('Idempotent payments: a retried request never charges twice. See README.md.')
    .addBearerAuth()
    .build();
  SwaggerModule.setup('docs', app, SwaggerModule.createDocument(app, openApi), { jsonDocumentUrl: 'docs-json' });
}
