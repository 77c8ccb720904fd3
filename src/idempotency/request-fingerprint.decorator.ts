import { type ExecutionContext, createParamDecorator } from '@nestjs/common';
import type { Request } from 'express';
import { requestFingerprint } from './idempotency-key';

/**
 * The fingerprint of the request: method, route, its parameters and parsed JSON body. The
 * route's pattern, not the raw path: Express routes `/v1/payments/` and
 * `/V1/payments` to the same handler, and a retry spelled either way is the
 * same request.
 */
export const RequestFingerprint = createParamDecorator((_data: unknown, context: ExecutionContext): string => {
  const request = context.switchToHttp().getRequest<Request>();
  const route = (request.route as { path?: string } | undefined)?.path ?? request.path;
  return requestFingerprint(request.method, `${request.baseUrl}${route}`, request.body, request.params as Record<string, string>);
});
