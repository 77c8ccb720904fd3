import {
  ArgumentsHost,
  Catch,
  ExceptionFilter,
  HttpException,
  Logger,
  NotFoundException,
} from '@nestjs/common';
import type { Response } from 'express';
import { MockProviderError, MockProviderErrorCode } from './mock-provider.errors';

const STATUS: Record<MockProviderErrorCode, number> = {
  [MockProviderErrorCode.ParameterInvalid]: 400,
  [MockProviderErrorCode.ParameterUnknown]: 400,
  [MockProviderErrorCode.BodyInvalid]: 400,
  [MockProviderErrorCode.IdempotencyKeyMissing]: 400,
  [MockProviderErrorCode.IdempotencyKeyReused]: 422,
  [MockProviderErrorCode.ChargeNotFound]: 404,
  [MockProviderErrorCode.ChargeNotRefundable]: 422,
  [MockProviderErrorCode.AmountTooLarge]: 422,
  [MockProviderErrorCode.RefundNotFound]: 404,
  [MockProviderErrorCode.RouteNotFound]: 404,
  [MockProviderErrorCode.RateLimited]: 429,
  [MockProviderErrorCode.ServiceUnavailable]: 503,
  [MockProviderErrorCode.DeadlineExceeded]: 504,
  [MockProviderErrorCode.Internal]: 500,
};

/** Every error leaves as `{"error":{"code","message"}}`, like a real processor's API. */
@Catch()
export class MockProviderErrorFilter implements ExceptionFilter {
  private readonly logger = new Logger(MockProviderErrorFilter.name);

  catch(exception: unknown, host: ArgumentsHost): void {
    const error = asMockProviderError(exception);
    if (error.code === MockProviderErrorCode.Internal) this.logger.error(exception);
    const response = host.switchToHttp().getResponse<Response>();
    if (error.retryAfterSeconds !== undefined) {
      response.setHeader('Retry-After', String(error.retryAfterSeconds));
    }
    response
      .status(STATUS[error.code])
      .json({ error: { code: error.code, message: error.message } });
  }
}

function asMockProviderError(exception: unknown): MockProviderError {
  if (exception instanceof MockProviderError) return exception;
  if (exception instanceof NotFoundException) {
    return new MockProviderError(MockProviderErrorCode.RouteNotFound, exception.message);
  }
  // Unparsable or oversized bodies, rejected by the body parser before any handler.
  if (exception instanceof HttpException && exception.getStatus() < 500) {
    return new MockProviderError(MockProviderErrorCode.BodyInvalid, exception.message);
  }
  return new MockProviderError(MockProviderErrorCode.Internal, 'Internal error');
}
