import { type ArgumentsHost, Catch, type ExceptionFilter, HttpException, Logger } from '@nestjs/common';
import type { Request, Response } from 'express';
import { DomainError, ErrorCode } from './domain-error';
import {
  domainErrorToHttp,
  httpExceptionToDomain,
  infrastructureErrorToDomain,
} from './error-envelope';
import { requestIdOf } from './request-id';

/**
 * Every error from every layer leaves in the one envelope. Anything that is
 * not a known error is a 500 that says nothing of the internals, carries the
 * request id, and is logged in full under that id.
 */
@Catch()
export class ErrorEnvelopeFilter implements ExceptionFilter {
  private readonly logger = new Logger('ErrorEnvelope');

  catch(exception: unknown, host: ArgumentsHost): void {
    const context = host.switchToHttp();
    const request = context.getRequest<Request>();
    const response = context.getResponse<Response>();
    const requestId = requestIdOf(request);

    const known =
      exception instanceof DomainError
        ? exception
        : exception instanceof HttpException
          ? httpExceptionToDomain(exception)
          : infrastructureErrorToDomain(exception);
    const domainError = known ?? new DomainError(ErrorCode.Internal, 'An unexpected error occurred.');
    const http = domainErrorToHttp(domainError);
    if (http.status >= 500) {
      http.body.error.request_id = requestId;
      this.logger.error({ msg: 'request failed', requestId, code: domainError.code, err: exception });
    }
    if (response.headersSent) {
      response.destroy();
      return;
    }
    response.status(http.status).set(http.headers).json(http.body);
  }
}
