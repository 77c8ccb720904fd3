import { type ArgumentsHost, Catch, type ExceptionFilter, HttpException, Logger } from '@nestjs/common';
import type { Request, Response } from 'express';
import type { Metrics } from '../metrics/metrics';
import { DomainError, IDEMPOTENCY_CONFLICT_CODES } from './domain-error';
import { errorReply, fromHttpException, fromInfrastructureError, isServerError, methodNotAllowed } from './error-envelope';
import { errorForLog } from './log-safety';
import { TransportError, TransportErrorCode } from './transport-error';
import type { HttpReply } from './http-reply';
import { requestIdFor } from './request-id';

/**
 * Every error from every layer leaves in the one envelope (replyForError).
 * No route for the request is a 405 with Allow where the path has routes
 * for other methods.
 */
@Catch()
export class ErrorEnvelopeFilter implements ExceptionFilter {
  /** `allowedAt`: the methods the app's routes answer at the request's path. */
  constructor(
    private readonly allowedAt: (request: Request) => string[],
    private readonly metrics: Metrics,
  ) {
    // Every series exists from the start at 0, so rate() and increase() see the first conflict.
    for (const code of IDEMPOTENCY_CONFLICT_CODES) metrics.idempotencyConflicts.inc({ code }, 0);
  }

  catch(exception: unknown, host: ArgumentsHost): void {
    const context = host.switchToHttp();
    const request = context.getRequest<Request>();
    const response = context.getResponse<Response>();
    const known = asApiError(exception);
    const answered = known && this.withMethods(known, request);
    if (response.headersSent) {
      // Too late for an answer: the error is still logged (replyForError logs a server error), and the connection cut.
      replyForError(exception, answered, requestIdFor(request));
      response.destroy();
      return;
    }
    const reply = countedReplyForError(this.metrics, exception, answered, requestIdFor(request));
    response.status(reply.status).set(reply.headers).type('application/json').send(reply.body);
  }

  private withMethods(error: DomainError | TransportError, request: Request): DomainError | TransportError {
    if (error.code !== TransportErrorCode.RouteNotFound) return error;
    const allow = this.allowedAt(request);
    return allow.length === 0 ? error : methodNotAllowed(request.method, allow);
  }
}

const logger = new Logger('ErrorEnvelope');

/** What the API says of a thrown value, when it knows: its own errors, Nest's HTTP exceptions, an infrastructure failure. */
export function asApiError(exception: unknown): DomainError | TransportError | undefined {
  if (exception instanceof DomainError || exception instanceof TransportError) return exception;
  return exception instanceof HttpException ? fromHttpException(exception) : fromInfrastructureError(exception);
}

/**
 * The envelope for anything thrown while answering a request, whoever
 * answers it (this filter, or EarlyAnswers before Nest). Anything unknown
 * is a 500 that says nothing of the internals, carries the request id, and
 * is logged in full under that id. `known`: what asApiError made of it,
 * as the caller may have refined it.
 */
export function replyForError(exception: unknown, known: DomainError | TransportError | undefined, requestId: string): HttpReply {
  const error = known ?? new TransportError(TransportErrorCode.Internal, 'An unexpected error occurred.');
  const serverError = isServerError(error);
  if (serverError) logger.error({ msg: 'request failed', requestId, code: error.code, err: errorForLog(exception) });
  return errorReply(error, serverError ? { request_id: requestId } : {});
}

/**
 * replyForError for an answer that is sent, with an idempotency conflict
 * counted (idempotency_conflicts_total). Every 409 idempotency_key_in_use
 * and 422 idempotency_key_reused is thrown by a write's service
 * (IdempotentWrites), the answer cache's 422 included, and answered through
 * here by this filter or by EarlyAnswers.
 */
export function countedReplyForError(
  metrics: Metrics,
  exception: unknown,
  known: DomainError | TransportError | undefined,
  requestId: string,
): HttpReply {
  if (known && IDEMPOTENCY_CONFLICT_CODES.includes(known.code)) metrics.idempotencyConflicts.inc({ code: known.code });
  return replyForError(exception, known, requestId);
}
