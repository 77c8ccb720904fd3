import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { type INestApplication, Logger } from '@nestjs/common';
import express, { type NextFunction, type Request, type Response } from 'express';
import { AuthFailureLimiter } from './clients/auth-failure-limiter';
import { ClientRateLimit } from './clients/client-rate-limit';
import { authenticateBeforeBody } from './clients/authentication.middleware';
import { ClientsService } from './clients/clients.service';
import { APP_CONFIG, type AppConfig } from './config/app-config';
import { AnswerCache } from './idempotency/answer-cache';
import { Metrics } from './metrics/metrics';
import { httpMetricsMiddleware } from './metrics/http-metrics';
import { EarlyAnswers, type EarlyWrite, earlyWrite } from './early-answers';
import { PaymentCreationService } from './payments/payment-creation.service';
import { PAYMENTS_PATH } from './payments/payments.controller';
import { CreatePaymentDto } from './payments/payments.dto';
import { PaymentLookupService } from './payments/payment-lookup.service';
import { PROVIDER_EVENTS_PATH } from './provider-events/provider-events.controller';
import { REFUNDS_PATH } from './refunds/refunds.controller';
import { CreateRefundDto } from './refunds/refunds.dto';
import { RefundsService } from './refunds/refunds.service';
import { allowedMethods } from './common/allowed-methods';
import { answerClientErrorsInEnvelope, answerConnectInEnvelope, answerExpectationsInEnvelope } from './common/client-error';
import { DomainError, ErrorCode } from './common/domain-error';
import { errorReply, fromBodyParserError } from './common/error-envelope';
import { ErrorEnvelopeFilter } from './common/error-envelope.filter';
import { ANSWER_HEADERS } from './common/http-reply';
import { parsedBodyProblem } from './common/json-body';
import { JsonBodyReader } from './common/json-body-reader';
import { requestLogging } from './common/logging';
import { requestForLog } from './common/log-safety';
import { serveOpenApi } from './common/openapi';
import { REQUEST_ID_HEADER, requestIdFor } from './common/request-id';
import { TransportError, TransportErrorCode } from './common/transport-error';
import { StrictValidationPipe } from './common/validation';

/** How often Node looks for requests past their timeout. */
const CONNECTION_SWEEP_MS = 1_000;

const logger = new Logger('HttpApp');

/**
 * An error answered by a middleware, before Nest's filter or the request
 * logger could: the same envelope, and a log line like the request logger's.
 */
function refuseBeforeRouting(request: Request, response: Response, error: DomainError | TransportError): void {
  const reply = errorReply(error);
  logger.warn({ msg: 'request refused', code: error.code, req: requestForLog(request), res: { statusCode: reply.status } });
  // Refused before its body was read (a failed authentication): close rather
  // than drain what may be a slow or endless body.
  if (!request.complete) response.setHeader('Connection', 'close');
  response.status(reply.status).set(reply.headers).type('application/json').send(reply.body);
}

/**
 * HTTP set-up shared by the API's entry point and the e2e tests, so the tests
 * exercise the same pipeline. The app must be created with bodyParser: false.
 *
 * In order: what EarlyAnswers answers before Express; then the headers
 * every answer carries, our request id among them; metrics; the API key
 * (before the body is read); the JSON body; what the parser accepted but
 * nothing may read; then Nest's guards, pipes and routes.
 */
export function configureHttpApp(app: INestApplication): void {
  const config = app.get<AppConfig>(APP_CONFIG);
  const expressApp = app.getHttpAdapter().getInstance() as express.Express;
  expressApp.disable('x-powered-by');
  // No ETag: every answer is Cache-Control: no-store, so there is no copy for
  // a client to revalidate, and hashing each body is CPU spent for nothing.
  expressApp.set('etag', false);
  // request.ip (what the failed-authentication limit counts by) is then the
  // address the trusted proxies saw, not the proxy's own.
  if (config.http.trustProxyHops > 0) expressApp.set('trust proxy', config.http.trustProxyHops);
  const server = app.getHttpServer() as Server;
  answerClientErrorsInEnvelope(server);
  answerConnectInEnvelope(server, (path) => allowedMethods(expressApp.router, path));
  answerExpectationsInEnvelope(server);
  // Node answers an HTTP/1.1 request without Host with a bare 400 of its
  // own before any middleware runs; the first middleware below refuses it
  // in the envelope instead.
  Object.assign(server, { requireHostHeader: false });
  // A client gets this long to send its whole request; Node's default of
  // five minutes lets a few slow bodies hold connections for ever.
  server.requestTimeout = config.http.requestTimeoutMs;
  server.headersTimeout = config.http.requestTimeoutMs;
  // Node enforces both only when it sweeps its connections, every 30 s by
  // default. This is http.createServer's option of that name, which Nest
  // does not pass through; Node reads it when the server starts listening.
  Object.assign(server, { connectionsCheckingInterval: CONNECTION_SWEEP_MS });

  // First, so that every answer carries them, whichever layer writes it.
  app.use((request: Request, response: Response, next: NextFunction) => {
    response.set(ANSWER_HEADERS).setHeader(REQUEST_ID_HEADER, requestIdFor(request));
    next();
  });
  // RFC 9112 3.2: an HTTP/1.1 request without Host is a 400.
  app.use((request: Request, response: Response, next: NextFunction) => {
    if (request.httpVersion !== '1.1' || request.headers.host !== undefined) return next();
    response.setHeader('Connection', 'close');
    refuseBeforeRouting(request, response, new TransportError(TransportErrorCode.RequestMalformed, 'The request has no Host header.'));
  });
  app.use(httpMetricsMiddleware(app.get(Metrics)));
  app.use(authenticateBeforeBody(app.get(ClientsService), app.get(AuthFailureLimiter), [PROVIDER_EVENTS_PATH]));
  const body = new JsonBodyReader();
  app.use(body.middleware);
  // Answered here, before any route or the request logger has run, so that a
  // failed authentication, a malformed or oversized body get their own code
  // (unauthenticated, body_invalid_json, body_too_large).
  app.use((error: unknown, request: Request, response: Response, next: NextFunction) => {
    const refusal = error instanceof DomainError || error instanceof TransportError ? error : fromBodyParserError(error);
    if (!refusal) return next(error);
    refuseBeforeRouting(request, response, refusal);
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
  const validation = new StrictValidationPipe();
  app.useGlobalPipes(validation);
  app.useGlobalFilters(new ErrorEnvelopeFilter((request) => allowedMethods(expressApp.router, request.path), app.get(Metrics)));
  // Exit 0 once drained rather than re-raise the signal: a deliberate stop is not a crash.
  app.enableShutdownHooks(['SIGTERM', 'SIGINT'], { useProcessExit: true });

  serveOpenApi(app);

  const early = new EarlyAnswers({
    clients: app.get(ClientsService),
    authFailures: app.get(AuthFailureLimiter),
    rateLimit: app.get(ClientRateLimit),
    answers: app.get(AnswerCache),
    writes: earlyWrites(app),
    lookup: app.get(PaymentLookupService),
    validation,
    metrics: app.get(Metrics),
    body,
    logging: requestLogging(),
  });
  const [pipeline, ...others] = server.listeners('request') as ((request: IncomingMessage, response: ServerResponse) => void)[];
  if (!pipeline || others.length > 0) throw new Error('configureHttpApp expects the HTTP server with Express as its only request listener');
  server.removeListener('request', pipeline);
  server.on('request', (request: IncomingMessage, response: ServerResponse) =>
    early.handle(request, response, () => pipeline(request, response)),
  );
}

/**
 * The idempotent writes EarlyAnswers answers, on their controllers' paths:
 * a request on one moves between the two ways in (a client's key is known
 * to a process only for a while), and its fingerprint names the route.
 */
function earlyWrites(app: INestApplication): EarlyWrite[] {
  const creation = app.get(PaymentCreationService);
  const refunds = app.get(RefundsService);
  return [
    earlyWrite({
      route: PAYMENTS_PATH,
      body: CreatePaymentDto,
      run: (command) => creation.create(command),
      countReplay: (reply) => creation.countAnswer(reply),
    }),
    earlyWrite({ route: REFUNDS_PATH, body: CreateRefundDto, run: (command) => refunds.create(command) }),
  ];
}
