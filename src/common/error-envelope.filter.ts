import { type ArgumentsHost, Catch, type ExceptionFilter, HttpException, Logger } from '@nestjs/common';
import type { Request, Response } from 'express';
import { DomainError } from './domain-error';
import { errorReply, fromHttpException, fromInfrastructureError, isServerError, methodNotAllowed } from './error-envelope';
import { errorForLog } from './log-safety';
import { TransportError, TransportErrorCode } from './transport-error';
import { requestIdFor } from './request-id';

/**
 * Every error from every layer leaves in the one envelope. Anything that is
 * not a known error is a 500 that says nothing of the internals, carries the
 * request id, and is logged in full under that id. No route for the request
 * is a 405 with Allow where the path has routes for other methods.
 */
@Catch()
export class ErrorEnvelopeFilter implements ExceptionFilter {
  private readonly logger = new Logger('ErrorEnvelope');

  /** `allowedAt`: the methods the app's routes answer at the request's path. */
  constructor(private readonly allowedAt: (request: Request) => string[]) {}

  catch(exception: unknown, host: ArgumentsHost): void {
    const context = host.switchToHttp();
    const request = context.getRequest<Request>();
    const response = context.getResponse<Response>();
    const requestId = requestIdFor(request);

    const known =
      exception instanceof DomainError || exception instanceof TransportError
        ? exception
        : exception instanceof HttpException
          ? fromHttpException(exception)
          : fromInfrastructureError(exception);
    const error = this.withMethods(
      known ?? new TransportError(TransportErrorCode.Internal, 'An unexpected error occurred.'),
      request,
    );
    const serverError = isServerError(error);
    if (serverError) this.logger.error({ msg: 'request failed', requestId, code: error.code, err: errorForLog(exception) });
    if (response.headersSent) {
      response.destroy();
      return;
    }
    const reply = errorReply(error, serverError ? { request_id: requestId } : {});
    response.status(reply.status).set(reply.headers).type('application/json').send(reply.body);
  }

  private withMethods(error: DomainError | TransportError, request: Request): DomainError | TransportError {
    if (error.code !== TransportErrorCode.RouteNotFound) return error;
    const allow = this.allowedAt(request);
    return allow.length === 0 ? error : methodNotAllowed(request.method, allow);
  }
}
